# Helpers shared by every module: one library per module, warnings on our own code only, and a
# test helper that labels tests so `ctest -L unit|integration|e2e` selects them.

set(TRIAGE_WARNINGS -Wall -Wextra -Werror=shadow -Werror=suggest-override)

# triage_add_library(NAME SOURCES ... [DEPS ...] [PRIVATE_DEPS ...])
function(triage_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE ${TRIAGE_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

# triage_add_executable(NAME SOURCES ... [DEPS ...])
function(triage_add_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${TRIAGE_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
endfunction()

# triage_add_test(NAME SOURCES ... LABEL unit|integration|e2e [DEPS ...] [TIMEOUT s]
#                 [TEST_PREFIX p])
# One gtest binary per call; every TEST inside is registered with ctest and carries LABEL.
# TEST_PREFIX is put before every test's name ("nightly_intake." gives
# nightly_intake.RecordOf.JaxAndLlmIds), so that `ctest -R <prefix>` selects the binary's tests.
function(triage_add_test name)
  cmake_parse_arguments(ARG "" "LABEL;TIMEOUT;TEST_PREFIX" "SOURCES;DEPS" ${ARGN})
  if(NOT ARG_LABEL MATCHES "^(unit|integration|e2e)$")
    message(FATAL_ERROR "triage_add_test(${name}): LABEL must be unit, integration or e2e")
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${TRIAGE_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest_main GTest::gmock)
  target_compile_definitions(${name} PRIVATE
    TRIAGE_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    TRIAGE_SHARED_DIR="${TRIAGE_SHARED_DIR}"
    TRIAGE_BINARY_DIR="${PROJECT_BINARY_DIR}")
  gtest_discover_tests(${name}
    TEST_PREFIX "${ARG_TEST_PREFIX}"
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT})
endfunction()

# Fails the configuration when `target` links one of `forbidden` (a list), directly or through
# any of its libraries (LINK_ONLY unwrapped), naming the library it came through.
function(triage_check_links target forbidden message)
  set(seen)
  set(todo ${target})
  while(todo)
    list(POP_FRONT todo current)
    if(current IN_LIST seen OR NOT TARGET ${current})
      continue()
    endif()
    list(APPEND seen ${current})
    get_target_property(libs ${current} LINK_LIBRARIES)
    if(NOT libs)
      continue()
    endif()
    foreach(lib IN LISTS libs)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" lib "${lib}")
      if(lib IN_LIST forbidden)
        message(FATAL_ERROR "${target} links ${lib} (through ${current}): ${message}")
      endif()
      list(APPEND todo ${lib})
    endforeach()
  endwhile()
endfunction()

# triage_forbid_dependency(TARGET FORBIDDEN MESSAGE): fails the configuration when TARGET links
# FORBIDDEN, directly or through any of its libraries. Call once every target exists.
function(triage_forbid_dependency target forbidden message)
  triage_check_links(${target} "${forbidden}" "${message}")
endfunction()

# The targets defined in `dir` and its subdirectories.
function(triage_targets_under dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    triage_targets_under(${sub} sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# The arrows between the wings (docs/architecture.md): no target under `from` links, directly
# or through others, a target under one of the TO folders, except the EXCEPT targets.
#   triage_forbid_wing_dependency(common TO agent coordinator)
function(triage_forbid_wing_dependency from)
  cmake_parse_arguments(arg "" "" "TO;EXCEPT" ${ARGN})
  set(forbidden)
  foreach(to IN LISTS arg_TO)
    triage_targets_under(${CMAKE_SOURCE_DIR}/${to} to_targets)
    list(APPEND forbidden ${to_targets})
  endforeach()
  if(arg_EXCEPT)
    list(REMOVE_ITEM forbidden ${arg_EXCEPT})
  endif()
  string(JOIN ", " to_text ${arg_TO})
  triage_targets_under(${CMAKE_SOURCE_DIR}/${from} from_targets)
  foreach(target IN LISTS from_targets)
    triage_check_links(${target} "${forbidden}"
                       "${from}/ must not depend on ${to_text} (docs/architecture.md)")
  endforeach()
endfunction()
