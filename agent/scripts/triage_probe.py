#!/usr/bin/python3
"""CPU probe of the triage-farm playbooks (contract: docs/probe.md).

  triage_probe.py --root WORKSPACE --key KEY --mode structure|dtype [--batch-size N] [--seq N]
  triage_probe.py --root WORKSPACE --loader PATH [--variant NAME] --mode ...

Imports a tt-forge-models loader the way tt-xla's runner does, runs it on CPU and prints one JSON
document per phase on stdout, one per line. Everything else (loader prints, warnings, tracebacks)
goes to stderr. Exit 0 when the phases ran (a failing phase is a result), 2 on usage errors.
"""
import argparse
import dataclasses
import importlib
import inspect
import json
import os
import re
import sys
import traceback

SCHEMA = 1
FORGE_REL = os.path.join("third_party", "tt_forge_models")
FORGE_PACKAGE = "third_party.tt_forge_models"
KEY_RE = re.compile(
    r"^(?P<model_path>.+?)/pytorch(?:-(?P<variant>.+?))?"
    r"-(?P<parallelism>single_device|data_parallel|tensor_parallel)"
    r"-(?P<run_mode>training|inference)$"
)
MAX_DEPTH = 16
MAX_ITEMS = 256


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
    parser.add_argument("--mode", required=True, choices=("structure", "dtype"))
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


def accepted_kwargs(fn, candidates):
    params = inspect.signature(fn).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return dict(candidates)
    names = {p.name for p in params}
    return {k: v for k, v in candidates.items() if k in names}


def forward(model, inputs):
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (list, tuple)):
        return model(*inputs)
    return model(inputs)


def describe_inputs(inputs, torch):
    if isinstance(inputs, dict):
        items = [(str(k), v) for k, v in inputs.items()]
    elif isinstance(inputs, (list, tuple)):
        items = [(str(i), v) for i, v in enumerate(inputs)]
    else:
        items = [("<single>", inputs)]
    described = []
    for name, value in items:
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


def error_of(exc):
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    }


def run_phase(
    phase, target, key, variant_value, model_info, make_loader, dtype, batch_size, torch, import_error
):
    doc = {
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
    print(f"===== triage_probe {key} phase={phase} dtype_override={dtype} =====", file=sys.stderr)
    if import_error is not None:
        doc["error"] = error_of(import_error)
        return doc
    try:
        torch.manual_seed(0)
        loader = make_loader()
        wanted = {}
        if dtype is not None:
            wanted["dtype_override"] = dtype
        if batch_size is not None:
            wanted["batch_size"] = batch_size
        model = loader.load_model(**accepted_kwargs(loader.load_model, wanted))
        inputs = loader.load_inputs(**accepted_kwargs(loader.load_inputs, wanted))
        doc["inputs"] = describe_inputs(inputs, torch)
        model.train()
        out = forward(model, inputs)
        doc["output"] = {
            "class": type(out).__name__,
            "module": type(out).__module__,
            "tree": tree(out, torch),
        }
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
        if phase != "structure" and is_tensor:
            try:
                unpacked.backward(gradient=torch.randn(unpacked.shape, dtype=unpacked.dtype))
            except Exception:
                doc["backward"] = "failed"
                raise
            doc["backward"] = "ok"
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

        phases = (
            [("structure", torch.bfloat16)]
            if args.mode == "structure"
            else [("bfloat16", torch.bfloat16), ("float32", None)]
        )
        for phase, dtype in phases:
            doc = run_phase(
                phase, target, key, variant_value, model_info, make_loader, dtype,
                args.batch_size, torch, import_error,
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
