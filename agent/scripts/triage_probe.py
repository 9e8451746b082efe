#!/usr/bin/python3
"""CPU probe of the triage-farm playbooks (contract: docs/probe.md).

  triage_probe.py --root WORKSPACE --key KEY --mode structure|dtype|inputs
                  [--batch-size N] [--seq N]
  triage_probe.py --root WORKSPACE --loader PATH [--variant NAME] --mode ...

Imports a tt-forge-models loader the way tt-xla's runner does, runs it on CPU and prints one JSON
document per phase on stdout, one per line. Everything else (loader prints, warnings, tracebacks)
goes to stderr. Exit 0 when the phases ran (a failing phase is a result), 2 on usage errors.

Each phase builds the model and its inputs as the runner builds a test: load_model (with
dtype_override only when its signature names the parameter), train() or eval(), load_inputs (with
dtype_override and batch_size only when named; **kwargs does not count). A phase offers
--batch-size, else the batch_size of the test's YAML entry (the key's, or for the eval phase its
inference entry's), else for a training phase the checkout runner's DEFAULT_TRAINING_BATCH_SIZE
(found under tests/runner/ with ast), else no batch. Every document's "built" says what was
passed.

Modes and their phases: structure -> structure; dtype -> bfloat16, float32; inputs -> train, eval;
floor -> floor. The floor phase measures the test's CPU bfloat16-vs-float32 PCC: the model and inputs
built once in float32, run in eval under no_grad, then the same weights and inputs cast to bfloat16;
"pcc" is the lowest PCC over the output's floating tensors (what bfloat16 alone costs the test).
The inputs mode adds what a fix of the model's inputs needs (the forward's and load_inputs'
signatures, how the inputs bind, the model's config, requirements files next to the loader, and
where an error was raised); each of these is best-effort and null when it cannot be read.
"""
import argparse
import ast
import copy
import dataclasses
import fnmatch
import importlib
import inspect
import json
import numbers
import os
import re
import sys
import traceback

SCHEMA = 1
FORGE_REL = os.path.join("third_party", "tt_forge_models")
FORGE_PACKAGE = "third_party.tt_forge_models"
RUNNER_REL = os.path.join("tests", "runner")
DEFAULT_BATCH_NAME = "DEFAULT_TRAINING_BATCH_SIZE"
KEY_RE = re.compile(
    r"^(?P<model_path>.+?)/pytorch(?:-(?P<variant>.+?))?"
    r"-(?P<parallelism>single_device|data_parallel|tensor_parallel)"
    r"-(?P<run_mode>training|inference)$"
)
MAX_DEPTH = 16
MAX_ITEMS = 256
PARAM_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "positional",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
    inspect.Parameter.KEYWORD_ONLY: "keyword_only",
    inspect.Parameter.VAR_POSITIONAL: "var_positional",
    inspect.Parameter.VAR_KEYWORD: "var_keyword",
}


class UsageError(Exception):
    pass


@dataclasses.dataclass
class Target:
    key: str
    model_path: str
    loader_rel: str  # relative to the workspace root
    module_name: str
    variant: object  # as given (value or enum member name), None when absent


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="triage_probe.py", description="CPU probe of a tt-forge-models loader (JSON lines)."
    )
    parser.add_argument("--root", required=True, help="tt-xla workspace root")
    parser.add_argument("--key", help="YAML key, e.g. yolo_mini/pytorch-N-single_device-training")
    parser.add_argument("--loader", help="path of <model_path>/pytorch/loader.py (instead of --key)")
    parser.add_argument("--variant", help="with --loader: ModelVariant value or member name")
    parser.add_argument("--mode", required=True, choices=("structure", "dtype", "inputs", "floor"))
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--seq", type=int, default=None, help="adds \"seq\": N to each document")
    args = parser.parse_args(argv)
    if (args.key is None) == (args.loader is None):
        parser.error("give exactly one of --key and --loader")
    if args.key is not None and args.variant is not None:
        parser.error("--variant goes with --loader (a key names its variant)")
    if args.batch_size is not None and args.batch_size < 1:
        parser.error("--batch-size must be at least 1")
    return args


def resolve_target(args):
    root = os.path.realpath(args.root)
    if not os.path.isdir(os.path.join(root, FORGE_REL)):
        raise UsageError(f"{args.root}: not a tt-xla workspace (no {FORGE_REL}/)")
    if args.key is not None:
        match = KEY_RE.match(args.key)
        if not match:
            raise UsageError(
                f"{args.key!r} is not a test key "
                "(<model_path>/pytorch[-<variant>]-<parallelism>-<run_mode>)"
            )
        model_path, variant, key = match.group("model_path"), match.group("variant"), args.key
    else:
        loader = os.path.realpath(os.path.join(root, args.loader))
        rel = os.path.relpath(loader, os.path.join(root, FORGE_REL))
        parts = rel.split(os.sep)
        if rel.startswith("..") or len(parts) < 3 or parts[-2:] != ["pytorch", "loader.py"]:
            raise UsageError(
                f"{args.loader}: not a {FORGE_REL}/<model_path>/pytorch/loader.py of {args.root}"
            )
        model_path, variant = "/".join(parts[:-2]), args.variant
        key = None
    if ".." in model_path.split("/") or model_path.startswith("/"):
        raise UsageError(f"{model_path!r}: not a model path")
    loader_rel = "/".join((FORGE_REL.replace(os.sep, "/"), model_path, "pytorch", "loader.py"))
    if not os.path.isfile(os.path.join(root, loader_rel)):
        raise UsageError(f"no loader for {args.key or args.loader}: {loader_rel} does not exist")
    module_name = ".".join([FORGE_PACKAGE] + model_path.split("/") + ["pytorch", "loader"])
    return root, Target(key, model_path, loader_rel, module_name, variant)


def resolve_variant(module, target):
    """(ModelVariant member or None, variant string or None); UsageError for unknown variants."""
    enum = getattr(module, "ModelVariant", None)
    if enum is None:
        if target.variant is not None:
            raise UsageError(f"{target.loader_rel} has no ModelVariant; got variant {target.variant!r}")
        return None, None
    if target.variant is None:
        if target.key is not None:  # a key without variant names no ModelVariant member
            raise UsageError(
                f"{target.key}: {target.loader_rel} has variants "
                f"{[m.value for m in enum]}; the key names none"
            )
        default = getattr(module.ModelLoader, "DEFAULT_VARIANT", None)
        member = default if default is not None else next(iter(enum))
        return member, member.value
    for member in enum:
        if target.variant == member.value:
            return member, member.value
    for member in enum:
        if target.variant == member.name:
            return member, member.value
    raise UsageError(
        f"unknown variant {target.variant!r} for {target.loader_rel}; "
        f"variants: {[m.value for m in enum]}"
    )


def named_kwargs(fn, candidates):
    """The candidates fn names as parameters, in the candidates' order: what tt-xla's runner
    passes. A **kwargs parameter does not count (the runner checks the names only)."""
    names = inspect.signature(fn).parameters
    return {k: v for k, v in candidates.items() if k in names}


def training_default_batch(root):
    """(batch, source) of the checkout's runner: the first DEFAULT_TRAINING_BATCH_SIZE = <int>
    assigned at module or class level in a .py file under <root>/tests/runner/ (files in sorted
    order, read with ast, never executed), source "<root-relative file>:<line>
    DEFAULT_TRAINING_BATCH_SIZE"; (None, None) when there is none (a runner without a training
    default passes no batch)."""
    runner = os.path.join(root, RUNNER_REL)
    paths = []
    for dirpath, dirnames, filenames in os.walk(runner):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        paths += [os.path.join(dirpath, f) for f in filenames if f.endswith(".py")]
    for path in sorted(paths):
        try:
            with open(path, "rb") as f:
                module = ast.parse(f.read(), filename=path)
        except (OSError, SyntaxError, ValueError) as e:
            print(f"triage_probe: cannot read {path}: {e}", file=sys.stderr)
            continue
        line = default_batch_line(module.body)
        if line is not None:
            value, lineno = line
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            return value, f"{rel}:{lineno} {DEFAULT_BATCH_NAME}"
    return None, None


def yaml_batch(root, key):
    """(batch, source) of the test's own YAML entry, as the runner reads it: the entry `key` of
    a test_config mapping in a .yaml file under <root>/tests/runner/test_config/ (files in sorted
    order, the first that defines the key), its top-level `batch_size` when that is a positive
    int, source "<root-relative file> batch_size"; (None, None) otherwise. arch_overrides are not
    read (the probe has no arch)."""
    config = os.path.join(root, RUNNER_REL, "test_config")
    paths = []
    for dirpath, dirnames, filenames in os.walk(config):
        dirnames.sort()
        paths += [os.path.join(dirpath, f) for f in filenames if f.endswith(".yaml")]
    try:
        import yaml
    except ImportError as e:
        print(f"triage_probe: no YAML reader, the entry's batch_size is not read: {e}", file=sys.stderr)
        return None, None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for path in sorted(paths):
        try:
            with open(path, "rb") as f:
                document = yaml.load(f, Loader=loader)
        except (OSError, yaml.YAMLError) as e:
            print(f"triage_probe: cannot read {path}: {e}", file=sys.stderr)
            continue
        entries = document.get("test_config") if isinstance(document, dict) else None
        if not isinstance(entries, dict) or key not in entries:
            continue
        entry = entries[key]
        batch = entry.get("batch_size") if isinstance(entry, dict) else None
        if isinstance(batch, int) and not isinstance(batch, bool) and batch >= 1:
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            return batch, f"{rel} batch_size"
        return None, None
    return None, None


def default_batch_line(body):
    """(value, line) of `DEFAULT_TRAINING_BATCH_SIZE = <int>` in these statements or in the
    bodies of the classes among them (nested classes included), else None."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            found = default_batch_line(node.body)
            if found is not None:
                return found
            continue
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        named = any(isinstance(t, ast.Name) and t.id == DEFAULT_BATCH_NAME for t in targets)
        if (
            named
            and isinstance(value, ast.Constant)
            and isinstance(value.value, int)
            and not isinstance(value.value, bool)
            and value.value >= 1
        ):
            return value.value, node.lineno
    return None


def forward(model, inputs):
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (list, tuple)):
        return model(*inputs)
    return model(inputs)


def input_items(inputs):
    """(name, value) per input: dict keys, list/tuple indices, or one item named <single>."""
    if isinstance(inputs, dict):
        return [(str(k), v) for k, v in inputs.items()]
    if isinstance(inputs, (list, tuple)):
        return [(str(i), v) for i, v in enumerate(inputs)]
    return [("<single>", inputs)]


def describe_inputs(inputs, torch):
    described = []
    for name, value in input_items(inputs):
        if isinstance(value, torch.Tensor):
            described.append(
                {"name": name, "dtype": str(value.dtype), "shape": list(value.shape), "kind": "tensor"}
            )
        else:
            described.append({"name": name, "dtype": None, "shape": None, "kind": type(value).__name__})
    return described


def tree(obj, torch, depth=0):
    if isinstance(obj, torch.Tensor):
        return {"type": "tensor", "shape": list(obj.shape), "dtype": str(obj.dtype)}
    leaf = {"type": "object", "class": type(obj).__name__, "attrs": {}}
    if depth >= MAX_DEPTH:
        return leaf
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = [f.name for f in dataclasses.fields(obj)][:MAX_ITEMS]
        attrs = {name: tree(getattr(obj, name), torch, depth + 1) for name in fields}
        return {"type": "object", "class": type(obj).__name__, "attrs": attrs}
    if isinstance(obj, dict):
        items = list(obj.items())[:MAX_ITEMS]
        return {"type": "dict", "items": {str(k): tree(v, torch, depth + 1) for k, v in items}}
    if isinstance(obj, list):
        return {"type": "list", "items": [tree(v, torch, depth + 1) for v in obj[:MAX_ITEMS]]}
    if isinstance(obj, tuple):
        return {"type": "tuple", "items": [tree(v, torch, depth + 1) for v in obj[:MAX_ITEMS]]}
    if isinstance(obj, (str, bytes, int, float, bool, type(None))):
        return leaf
    attrs = getattr(obj, "__dict__", None)
    if isinstance(attrs, dict) and not isinstance(obj, torch.nn.Module):
        public = [(k, v) for k, v in attrs.items() if not k.startswith("_")][:MAX_ITEMS]
        return {
            "type": "object",
            "class": type(obj).__name__,
            "attrs": {k: tree(v, torch, depth + 1) for k, v in public},
        }
    return leaf


def model_info_of(module, member):
    """The loader's ModelInfo (model, variant, task, source) as strings, None when it has none.

    Enum members give their value ("cv_object_det"); a missing field is null.
    """
    get = getattr(getattr(module, "ModelLoader", None), "_get_model_info", None)
    if get is None:
        return None
    try:
        info = get(member) if member is not None else get()
    except Exception:
        traceback.print_exc(file=sys.stderr)
        return None
    fields = {}
    for name in ("model", "variant", "task", "source"):
        value = getattr(info, name, None)
        value = getattr(value, "value", value)
        fields[name] = None if value is None else str(value)
    return fields


def error_of(exc, extras=None):
    """The error member; with the inputs mode's extras also its site and missing module."""
    error = {
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    }
    if extras is not None:
        error["site"] = best_effort("the error's site", extras.site_of, exc)
        error["module"] = best_effort("the missing module", missing_module_of, exc)
    return error


# ---------------------------------------------------------------------------------------------
# The inputs mode's extra members (docs/probe.md, "The inputs mode"). Each is best-effort: a
# failure to read one leaves it null (its traceback goes to stderr), never the phase's result.


def best_effort(what, fn, *args):
    try:
        return fn(*args)
    except Exception:
        print(f"triage_probe: cannot read {what}:", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        return None


def missing_module_of(exc):
    name = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    return name if isinstance(name, str) else None


def safe_repr(value):
    try:
        return repr(value)
    except Exception:
        return None


def params_of(fn):
    """The parameters of a callable as the probe reports them (a bound method: without self)."""
    params = []
    for p in inspect.signature(fn).parameters.values():
        has_default = p.default is not inspect.Parameter.empty
        params.append(
            {
                "name": p.name,
                "kind": PARAM_KINDS[p.kind],
                "has_default": has_default,
                "default": safe_repr(p.default) if has_default else None,
            }
        )
    return params


def container_of(inputs, torch):
    if isinstance(inputs, dict):
        return "dict"
    if isinstance(inputs, list):
        return "list"
    if isinstance(inputs, tuple):
        return "tuple"
    if isinstance(inputs, torch.Tensor):
        return "tensor"
    return type(inputs).__name__


def binding_of(model, inputs):
    """How the inputs bind to model.forward, the way the probe calls it (input -> parameter)."""
    signature = inspect.signature(model.forward)
    is_dict = isinstance(inputs, dict)
    try:
        if is_dict:
            bound = signature.bind(**inputs)
        elif isinstance(inputs, (list, tuple)):
            bound = signature.bind(*inputs)
        else:
            bound = signature.bind(inputs)
    except TypeError as e:
        return {"ok": False, "params": [], "error": str(e)}
    names = [name for name, _ in input_items(inputs)]
    positional = iter(names)
    param_of = {}
    for param, value in bound.arguments.items():
        kind = signature.parameters[param].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            for _ in value:
                param_of[next(positional)] = param
        elif kind is inspect.Parameter.VAR_KEYWORD:
            for name in value:
                param_of[str(name)] = param
        elif is_dict:
            param_of[param] = param
        else:
            param_of[next(positional)] = param
    pairs = [{"input": name, "param": param_of[name]} for name in names if name in param_of]
    return {"ok": True, "params": pairs, "error": None}


def config_of(model):
    """The HF-style config members the playbooks read; None when the model has no config."""
    config = getattr(model, "config", None)
    if config is None:
        return None
    if isinstance(config, dict):
        get = config.get
    else:
        def get(name):
            return getattr(config, name, None)

    def as_int(value):
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)
        return None

    is_encoder_decoder = get("is_encoder_decoder")
    return {
        "is_encoder_decoder": is_encoder_decoder if isinstance(is_encoder_decoder, bool) else None,
        "decoder_start_token_id": as_int(get("decoder_start_token_id")),
        "pad_token_id": as_int(get("pad_token_id")),
    }


def requirements_of(loader_dir):
    """requirements*.txt next to the loader, sorted by name, with their non-comment lines."""
    found = []
    for name in sorted(os.listdir(loader_dir)):
        path = os.path.join(loader_dir, name)
        if not fnmatch.fnmatchcase(name, "requirements*.txt") or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f]
        found.append(
            {"file": name, "packages": [l for l in lines if l and not l.startswith("#")]}
        )
    return found


class InputsExtras:
    """What the inputs mode adds to every document, for one target."""

    def __init__(self, root, target, member):
        self.root = root
        self.model_dir = os.path.realpath(
            os.path.join(root, FORGE_REL, *target.model_path.split("/"))
        )
        self.loader_dir = os.path.dirname(os.path.join(root, target.loader_rel))
        self.variant_member = None if member is None else best_effort(
            "the variant member", lambda: str(member.name)
        )
        self.requirements = best_effort("the requirements files", requirements_of, self.loader_dir)

    @staticmethod
    def _under(path, directory):
        return os.path.commonpath([path, directory]) == directory

    def path_of(self, filename):
        """Root-relative ('/'-separated) when under the root, else absolute; pseudo-files such
        as <frozen importlib._bootstrap> as they are."""
        if filename.startswith("<"):
            return filename
        real = os.path.realpath(filename)
        if self._under(real, self.root):
            return os.path.relpath(real, self.root).replace(os.sep, "/")
        return real

    def in_loader_dir(self, filename):
        if filename.startswith("<"):
            return False
        return self._under(os.path.realpath(filename), self.model_dir)

    def members(self):
        """The members before anything ran: each filled in as the phase gets to it."""
        return {
            "variant_member": self.variant_member,
            "container": None,
            "forward": None,
            "load_inputs": None,
            "binding": None,
            "config": None,
            "requirements": self.requirements,
        }

    def forward_of(self, model):
        fn = model.forward
        func = getattr(fn, "__func__", fn)
        try:
            func = inspect.unwrap(func)
        except ValueError:
            pass
        params = params_of(fn)

        def source_file():
            return inspect.getsourcefile(func) or inspect.getfile(func)

        file = best_effort("the forward's source file", source_file)
        return {
            "class": type(model).__name__,
            "module": type(model).__module__,
            "qualname": func.__qualname__,
            "file": None if file is None else self.path_of(file),
            "in_loader_dir": file is not None and self.in_loader_dir(file),
            "params": params,
        }

    def site_of(self, exc):
        frames = traceback.extract_tb(exc.__traceback__)
        if not frames:
            return None
        frame = frames[-1]
        return {
            "file": self.path_of(frame.filename),
            "function": frame.name,
            "line": frame.lineno if isinstance(frame.lineno, int) else 0,
            "in_loader_dir": self.in_loader_dir(frame.filename),
        }

    @staticmethod
    def add_trees(described, inputs, torch):
        """inputs[i].tree: the NODE of a non-tensor item (null for tensors, or when unreadable)."""
        for item in described:
            item["tree"] = None
        values = best_effort("the inputs", lambda: [v for _, v in input_items(inputs)]) or []
        for item, value in zip(described, values):
            if not isinstance(value, torch.Tensor):
                item["tree"] = best_effort(f"the tree of input {item['name']}", tree, value, torch)


def base_doc(target, key, variant_value, model_info, phase):
    """A phase's document before it ran: not ok, nothing built."""
    return {
        "schema": SCHEMA,
        "key": key,
        "loader": target.loader_rel,
        "variant": variant_value,
        "model_info": model_info,
        "phase": phase,
        "ok": False,
        "error": None,
        "inputs": [],
        "output": None,
        "unpacked": None,
        "backward": "skipped",
    }


def run_phase(
    phase, target, key, variant_value, model_info, make_loader, dtype, batch, torch,
    import_error, extras=None,
):
    """One phase, built as tt-xla's runner builds a test: load_model (dtype_override only when
    its signature names it), train() or eval(), load_inputs (dtype_override and batch_size only
    when named; batch_size only when the phase has a batch). structure: forward, unpack.
    bfloat16/float32: the same, then backward of a tensor. train: as structure (no backward).
    eval: forward under no_grad only. batch: (batch_size, its source), both None without one.
    extras (the inputs mode): the document's extra members."""
    batch_size, batch_source = batch
    doc = base_doc(target, key, variant_value, model_info, phase)
    if extras is not None:
        doc.update(extras.members())
    built = {
        "load_model": None,
        "load_inputs": None,
        "batch_size": batch_size,
        "batch_source": batch_source,
    }
    doc["built"] = built
    print(
        f"===== triage_probe {key} phase={phase} dtype_override={dtype} batch_size={batch_size}"
        f" ({batch_source or 'none'}) =====",
        file=sys.stderr,
    )
    if import_error is not None:
        doc["error"] = error_of(import_error, extras)
        return doc
    try:
        torch.manual_seed(0)
        loader = make_loader()
        wanted = {}
        if dtype is not None:
            wanted["dtype_override"] = dtype
        model_kwargs = named_kwargs(loader.load_model, wanted)
        built["load_model"] = list(model_kwargs)
        model = loader.load_model(**model_kwargs)
        if extras is not None:
            doc["forward"] = best_effort("the forward's signature", extras.forward_of, model)
            doc["config"] = best_effort("the model's config", config_of, model)
        if phase == "eval":
            model.eval()
        else:
            model.train()
        if batch_size is not None:
            wanted["batch_size"] = batch_size
        inputs_kwargs = named_kwargs(loader.load_inputs, wanted)
        built["load_inputs"] = list(inputs_kwargs)
        if extras is not None:
            doc["load_inputs"] = best_effort(
                "load_inputs' signature",
                lambda: {"params": params_of(loader.load_inputs), "passed": list(inputs_kwargs)},
            )
        inputs = loader.load_inputs(**inputs_kwargs)
        doc["inputs"] = describe_inputs(inputs, torch)
        if extras is not None:
            doc["container"] = best_effort("the inputs' container", container_of, inputs, torch)
            extras.add_trees(doc["inputs"], inputs, torch)
            doc["binding"] = best_effort("the inputs' binding", binding_of, model, inputs)
        if phase == "eval":
            with torch.no_grad():
                out = forward(model, inputs)
        else:
            out = forward(model, inputs)
        doc["output"] = {
            "class": type(out).__name__,
            "module": type(out).__module__,
            "tree": tree(out, torch),
        }
        if phase != "eval":
            try:
                unpacked = loader.unpack_forward_output(out)
            except Exception as e:
                doc["unpacked"] = {"ok": False, "kind": "error", "error": f"{type(e).__name__}: {e}"}
                raise
            is_tensor = isinstance(unpacked, torch.Tensor)
            doc["unpacked"] = {
                "ok": True,
                "kind": "tensor" if is_tensor else type(unpacked).__name__,
                "error": None,
            }
            if phase in ("bfloat16", "float32") and is_tensor:
                try:
                    unpacked.backward(gradient=torch.randn(unpacked.shape, dtype=unpacked.dtype))
                except Exception:
                    doc["backward"] = "failed"
                    raise
                doc["backward"] = "ok"
        doc["ok"] = True
    except Exception as e:
        traceback.print_exc(file=sys.stderr)
        doc["error"] = error_of(e, extras)
    return doc


def output_tensors(obj, torch, depth=0):
    """The floating tensors of an output, in a stable order (dict keys as given)."""
    if isinstance(obj, torch.Tensor):
        return [obj] if obj.is_floating_point() else []
    if depth >= MAX_DEPTH:
        return []
    if isinstance(obj, dict):
        values = list(obj.values())
    elif isinstance(obj, (list, tuple)):
        values = list(obj)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        values = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    elif hasattr(obj, "to_tuple"):  # transformers' ModelOutput
        values = list(obj.to_tuple())
    else:
        return []
    return [t for v in values for t in output_tensors(v, torch, depth + 1)]


def pcc_of(golden, other, torch):
    """Pearson correlation of two tensors (flattened, float64); 1.0 for two equal constants."""
    a = golden.detach().to(torch.float64).flatten()
    b = other.detach().to(torch.float64).flatten()
    if a.numel() != b.numel():
        raise ValueError(f"outputs differ in size: {a.numel()} vs {b.numel()}")
    if a.numel() == 0:
        return 1.0
    a = a - a.mean()
    b = b - b.mean()
    denominator = float(a.norm() * b.norm())
    if denominator == 0.0:
        return 1.0 if torch.equal(golden.to(torch.float64), other.to(torch.float64)) else 0.0
    return float((a * b).sum()) / denominator


def cast_inputs(inputs, dtype, torch):
    """The inputs with their floating tensors cast to dtype (containers rebuilt, others kept)."""
    if isinstance(inputs, torch.Tensor):
        return inputs.to(dtype) if inputs.is_floating_point() else inputs
    if isinstance(inputs, dict):
        return {k: cast_inputs(v, dtype, torch) for k, v in inputs.items()}
    if isinstance(inputs, (list, tuple)):
        return type(inputs)(cast_inputs(v, dtype, torch) for v in inputs)
    return inputs


def run_floor(target, key, variant_value, model_info, make_loader, batch, torch, import_error):
    """The floor phase: one document with "pcc" (null when it could not be measured)."""
    batch_size, batch_source = batch
    doc = base_doc(target, key, variant_value, model_info, "floor")
    doc.update(pcc=None, tensors=0)
    doc["built"] = {"load_model": [], "load_inputs": None, "batch_size": batch_size,
                    "batch_source": batch_source}
    print(f"===== triage_probe {key} phase=floor batch_size={batch_size} =====", file=sys.stderr)
    if import_error is not None:
        doc["error"] = error_of(import_error)
        return doc
    try:
        torch.manual_seed(0)
        loader = make_loader()
        model = loader.load_model()
        model = model.to(torch.float32)
        model.eval()
        wanted = {} if batch_size is None else {"batch_size": batch_size}
        inputs_kwargs = named_kwargs(loader.load_inputs, wanted)
        doc["built"]["load_inputs"] = list(inputs_kwargs)
        inputs = cast_inputs(loader.load_inputs(**inputs_kwargs), torch.float32, torch)
        doc["inputs"] = describe_inputs(inputs, torch)
        with torch.no_grad():
            golden = forward(model, inputs)
            low = forward(copy.deepcopy(model).to(torch.bfloat16),
                          cast_inputs(inputs, torch.bfloat16, torch))
        doc["output"] = {
            "class": type(golden).__name__,
            "module": type(golden).__module__,
            "tree": tree(golden, torch),
        }
        ours, theirs = output_tensors(golden, torch), output_tensors(low, torch)
        if not ours or len(ours) != len(theirs):
            raise ValueError(
                f"the outputs have {len(ours)} and {len(theirs)} floating tensors: nothing to compare"
            )
        doc["tensors"] = len(ours)
        doc["pcc"] = min(pcc_of(a, b, torch) for a, b in zip(ours, theirs))
        doc["ok"] = True
    except Exception as e:
        traceback.print_exc(file=sys.stderr)
        doc["error"] = error_of(e)
    return doc


def main(argv):
    args = parse_args(argv)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # loaders may print; stdout carries only the JSON documents
    try:
        root, target = resolve_target(args)
        if root not in sys.path:
            sys.path.insert(0, root)
        import torch

        import_error = None
        member = variant_value = model_info = None
        try:
            module = importlib.import_module(target.module_name)
        except Exception as e:  # a broken loader is a result, reported per phase
            traceback.print_exc(file=sys.stderr)
            import_error, module = e, None
            variant_value = target.variant
        if module is not None:
            member, variant_value = resolve_variant(module, target)
            model_info = model_info_of(module, member)
        key = target.key or (
            f"{target.model_path}/pytorch"
            + (f"-{variant_value}" if variant_value is not None else "")
            + "-single_device-training"
        )

        def make_loader():
            return module.ModelLoader(variant=member) if member is not None else module.ModelLoader()

        phases = {
            "structure": [("structure", torch.bfloat16)],
            "dtype": [("bfloat16", torch.bfloat16), ("float32", None)],
            "inputs": [("train", torch.bfloat16), ("eval", torch.bfloat16)],
            "floor": [("floor", None)],
        }[args.mode]
        extras = InputsExtras(root, target, member) if args.mode == "inputs" else None
        training_batch = None  # the runner's training default, read once when a phase needs it
        for phase, dtype in phases:
            # The test the phase stands for: the key's own (training) entry, or for the eval
            # phase the inference entry of the same model and variant.
            if phase == "floor":
                test_key = key  # the test whose threshold the floor is for, as given
            else:
                test_key = key.rsplit("-", 1)[0] + ("-inference" if phase == "eval" else "-training")
            if args.batch_size is not None:
                batch = (args.batch_size, "--batch-size")
            elif (from_yaml := yaml_batch(root, test_key))[0] is not None:
                batch = from_yaml
            elif phase == "eval" or (phase == "floor" and test_key.endswith("-inference")):
                batch = (None, None)  # an inference test gets no batch but the YAML's
            else:
                if training_batch is None:
                    training_batch = training_default_batch(root)
                batch = training_batch
            if phase == "floor":
                doc = run_floor(
                    target, key, variant_value, model_info, make_loader, batch, torch, import_error
                )
            else:
                doc = run_phase(
                    phase, target, key, variant_value, model_info, make_loader, dtype, batch,
                    torch, import_error, extras,
                )
            if args.seq is not None:
                doc["seq"] = args.seq
            real_stdout.write(json.dumps(doc) + "\n")
            real_stdout.flush()
    except UsageError as e:
        print(f"triage_probe: {e}", file=sys.stderr)
        return 2
    finally:
        sys.stdout = real_stdout
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
