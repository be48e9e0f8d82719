"""Writes cases.json and the torch.save files for tests/mutation_gaps.rs.

Run with Python 3 and PyTorch 2.15 (bench/.venv):
    python crates/serialize/tests/data/mutation_gaps/gen.py

- "read": pickles Python writes (a "torch_refuses" case: PyTorch's
  weights-only unpickler refuses a global in it) (protocols 0-5; those using text opcodes
  whose argument ends in a newline, other than GLOBAL, are left out) and
  hand-made pickles Python's unpickler reads, each with its value's repr
  (Python 3.12's OrderedDict/Counter form; bytearray and torch.Size shown
  as the bytes / tuple ferrotorch reads them as).
- "write": Python's protocol-2 pickle of a value, with unused memo PUTs
  removed (pickletools.optimize): the bytes torch.save's pickler writes.
- "globals": whether PyTorch's weights-only unpickler allows a global.
- "torch": torch.save files with their tensors' dtype, shape, strides,
  storage offset, elements, requires_grad and which storage each views,
  and the data.pkl with unused PUTs removed.
"""
import collections, io, json, os, pickle, pickletools, zipfile
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def py_repr(v):
    if isinstance(v, collections.Counter):
        return "Counter(" + dict_repr(v) + ")" if v else "Counter()"
    if isinstance(v, collections.OrderedDict):
        return "OrderedDict(" + dict_repr(v) + ")" if v else "OrderedDict()"
    if isinstance(v, dict):
        return dict_repr(v)
    if isinstance(v, torch.Size):
        return py_repr(tuple(v))
    if isinstance(v, list):
        return "[" + ", ".join(py_repr(x) for x in v) + "]"
    if isinstance(v, tuple):
        if len(v) == 1:
            return "(" + py_repr(v[0]) + ",)"
        return "(" + ", ".join(py_repr(x) for x in v) + ")"
    if isinstance(v, bytearray):
        return repr(bytes(v))
    return repr(v)


def dict_repr(d):
    return "{" + ", ".join(py_repr(k) + ": " + py_repr(x) for k, x in d.items()) + "}"


def text_opcodes(p):
    bad = []
    for op, arg, pos in pickletools.genops(p):
        if op.name == "GLOBAL":
            continue
        if op.arg is not None and op.arg.name.endswith(("nl", "nl_short", "nl_long", "nl_pair")):
            bad.append(op.name)
    return bad


def values():
    shared = [1, 2]
    many = [str(i) + "s" for i in range(300)]
    row = list(range(30))
    long_s = "x" * 100
    od = collections.OrderedDict([("b", 1), ("a", [2, 3]), ("c", {"d": None})])
    return {
        "none": None,
        "true": True,
        "false": False,
        "ints": [0, 1, 127, 128, 255, 256, 65535, 65536, -1, -128, -255, -256, -65536,
                 2**31 - 1, -2**31, 2**31, -2**31 - 1, 2**40, -2**40, 2**47, 2**55,
                 -2**55, 2**63 - 1, -2**63, 2**62, -2**62 - 1],
        "floats": [0.0, -0.0, 0.12, 1.0, 3.0, -2.5, 1e-05, 1.5e-07, 0.0001, 1e16, 1e15,
                   1e300, 5e-324, 123456789012345.0, 1e22, float("inf"), float("-inf"),
                   float("nan")],
        "strs": ["", "a", "it's", 'say "hi"', "both ' and \"", "tab\t nl\n cr\r bs\\",
                 "\x00\x01\x1f\x20\x7e\x7f", "é ü 日本 \U0001f600", "x" * 300],
        "empty_bytes": b"",
        "bytes": [b"\x00\xff", b"'", b'"', b"'\"", b"\\\n\r\t", bytes(range(256)),
                  b"y" * 300],
        "bytearray": bytearray(b"ab\x00"),
        "empty_bytearray": bytearray(),
        "lists": [[], [1], [1, 2], [[], [[]]]],
        "long_list": list(range(1001)),
        "tuples": [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), ((),), ((1,), (2, (3,)))],
        "dicts": [{}, {"a": 1}, {1: "x", 2: "y"}, {1: "a", "b": 2, -5: None}],
        "big_dict": {i: i * 2 for i in range(1001)},
        "ordered": od,
        "ordered_empty": collections.OrderedDict(),
        "counter": collections.Counter({"a": 3, "b": 1}),
        "counter_int_keys": collections.Counter({30: 2, 80: 1}),
        "counter_empty": collections.Counter(),
        "shared": [shared, shared, (shared,)],
        "memo_over_256": many + many,
        "shared_rows": [row] * 40,
        "shared_long_str": [long_s] * 150,
        "torch_size": torch.Size([2, 3]),
        "torch_size_empty": torch.Size([]),
        "nested": {"model": od, "opt": {"state": {0: {"step": 3}}, "groups": [{"lr": 0.1, "params": [0, 1]}]}},
    }


def hand():
    L = lambda b: b"\x8a" + bytes([len(b)]) + b
    return {
        "dict_opcode": b"\x80\x02(X\x01\x00\x00\x00aK\x01K\x02K\x03d.",
        "list_opcode": b"\x80\x02(K\x01K\x02l.",
        "tuple_opcode": b"\x80\x02(K\x01K\x02K\x03K\x04t.",
        "empty_mark_tuple": b"\x80\x02(t.",
        "pop": b"\x80\x02K\x01K\x020.",
        "pop_mark": b"\x80\x02K\x07(K\x01K\x021.",
        "dup_shared": b"\x80\x02]2K\x01a\x86.",
        "long_binput_get": b"\x80\x02K\x05r\x00\x01\x00\x000j\x00\x01\x00\x00.",
        "binput_get": b"\x80\x02K\x05q\x07]h\x07a.",
        "long4": b"\x80\x02\x8b\x02\x00\x00\x00\x00\x01.",
        "long4_empty": b"\x80\x02\x8b\x00\x00\x00\x00.",
        "long1_empty": b"\x80\x02\x8a\x00.",
        "long1_minus_one_9": b"\x80\x02" + L(b"\xff" * 9) + b".",
        "long1_max_9": b"\x80\x02" + L(b"\xff" * 7 + b"\x7f\x00") + b".",
        "long1_min_9": b"\x80\x02" + L(b"\x00" * 7 + b"\x80\xff") + b".",
        "long1_min_10": b"\x80\x02" + L(b"\x00" * 7 + b"\x80\xff\xff") + b".",
        "long1_one_3": b"\x80\x02" + L(b"\x01\x00\x00") + b".",
        "long1_neg_2": b"\x80\x02" + L(b"\x00\x80") + b".",
        "long1_pos_2": b"\x80\x02" + L(b"\x00\x7f") + b".",
        "binint_neg": b"\x80\x02J\xfe\xff\xff\xff.",
        "binint2_max": b"\x80\x02M\xff\xff.",
        "binunicode8": b"\x80\x04\x8d\x02\x00\x00\x00\x00\x00\x00\x00ab.",
        "binbytes8": b"\x80\x04\x8e\x03\x00\x00\x00\x00\x00\x00\x00a\x00b.",
        "bytearray8": b"\x80\x05\x96\x02\x00\x00\x00\x00\x00\x00\x00hi.",
        "binbytes": b"\x80\x03B\x02\x00\x00\x00xy.",
        "frame": b"\x80\x04\x95\x02\x00\x00\x00\x00\x00\x00\x00K\x09.",
        "setitem": b"\x80\x02}X\x01\x00\x00\x00kK\x02s.",
        "tuple3_stack": b"\x80\x02K\x01K\x02K\x03\x87.",
        "tuple2_stack": b"\x80\x02K\x01K\x02\x86.",
        "tuple1_stack": b"\x80\x02K\x01\x85.",
        "empty_mark_list": b"\x80\x02(l.",
        "appends_empty_mark": b"\x80\x02](e.",
        "codecs_utf8": b"\x80\x02c_codecs\nencode\nX\x02\x00\x00\x00\xc3\xa9X\x05\x00\x00\x00utf-8\x86R.",
        "codecs_latin1": b"\x80\x02c_codecs\nencode\nX\x02\x00\x00\x00\xc3\xa9X\x06\x00\x00\x00latin1\x86R.",
        "bytearray_of_bytes": b"\x80\x03cbuiltins\nbytearray\nC\x02ab\x85R.",
        "ordered_from_tuple": b"\x80\x02ccollections\nOrderedDict\n((X\x01\x00\x00\x00aK\x01t(X\x01\x00\x00\x00bK\x02tt\x85R.",
        "ordered_list_pairs": b"\x80\x02ccollections\nOrderedDict\n((X\x01\x00\x00\x00aK\x01l(X\x01\x00\x00\x00bK\x02ll\x85R.",
        "counter_of_dict": b"\x80\x02ccollections\nCounter\n}(X\x01\x00\x00\x00aK\x02X\x01\x00\x00\x00bK\x01u\x85R.",
        "counter_no_args": b"\x80\x02ccollections\nCounter\n)R.",
        "size_of_list": b"\x80\x02ctorch\nSize\n](K\x02K\x03e\x85R.",
        "size_no_args": b"\x80\x02ctorch\nSize\n)R.",
        "ordered_build_dict": b"\x80\x02ccollections\nOrderedDict\n)R}X\x01\x00\x00\x00aK\x01sb.",
        "stack_global": b"\x80\x04\x8c\x0bcollections\x94\x8c\x0bOrderedDict\x94\x93)R.",
        "newobj": b"\x80\x02ccollections\nOrderedDict\n)\x81.",
        "bool_true_int": b"\x80\x02\x88K\x01\x86.",
    }


BIG = {"long_list", "big_dict", "memo_over_256", "shared_rows", "shared_long_str"}


def torch_reads(p):
    """Whether torch.load(weights_only=True)'s unpickler reads the pickle
    (else its message). Its refusals of globals are kept ("torch_refuses":
    ferrotorch refuses them too); ferrotorch reads opcodes it does not
    (protocols 3-5), so those refusals are not."""
    import warnings
    from torch import _weights_only_unpickler as wou
    warnings.simplefilter("ignore")
    try:
        wou.Unpickler(io.BytesIO(p), encoding="utf-8").load()
        return True
    except Exception as e:  # noqa: BLE001 - any refusal counts
        return str(e).splitlines()[0][:120]


def read_cases():
    out = []
    for name, v in values().items():
        protos = (2, 4) if name in BIG else range(6)
        for proto in protos:
            p = pickle.dumps(v, protocol=proto)
            if text_opcodes(p):
                continue
            ok = torch_reads(p)
            case = {"name": f"{name}/p{proto}", "pkl": p.hex(), "repr": py_repr(v)}
            if ok is not True and ok.startswith("Unsupported global"):
                case = {"name": f"{name}/p{proto}", "pkl": p.hex(), "torch_refuses": ok}
            out.append(case)
    for name, p in hand().items():
        v = pickle.loads(p)
        out.append({"name": name, "pkl": p.hex(), "repr": py_repr(v)})
    return out


def write_values():
    v = values()
    attrs = collections.OrderedDict([("w", 1), ("b", 2)])
    attrs.x = 1
    attrs.y = "z"
    return {
        "none": None,
        "true": True,
        "false": False,
        "ints": v["ints"],
        "floats": v["floats"],
        "strs": v["strs"],
        "one_bytes": b"\x00\xff'ab\\",
        "lists": [[], [1, 2], [[3, 4], []], list(range(1000))],
        "tuples": [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), ((5, 6), 7)],
        "dicts": [{}, {1: "x", 2: "y"}, {1: "a", "b": 2, -5: None}],
        "ordered": collections.OrderedDict([("w", 1), ("b", [2, 3])]),
        "ordered_empty": collections.OrderedDict(),
        "ordered_attrs": attrs,
        "counter": v["counter"],
        "counter_int_keys": v["counter_int_keys"],
        "counter_empty": v["counter_empty"],
    }


def write_cases():
    out = []
    for name, v in write_values().items():
        p = pickletools.optimize(pickle.dumps(v, protocol=2))
        assert not any(op.name in ("BINGET", "LONG_BINGET") for op, _, _ in pickletools.genops(p)), name
        out.append({"name": name, "pkl": p.hex(), "repr": py_repr(v)})
    return out


def tensors():
    torch.manual_seed(0)
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    out = {}
    out["views"] = {
        "base": base,
        "t": base.t(),
        "row2": base[2],
        "col3": base[:, 3],
        "strided": base[1:, ::2],
        "scalar": base[3, 5],
        "empty_view": base[4:],
        "narrow": base.view(-1)[5:17].view(3, 4),
    }
    dt = {}
    for d, vals in [
        (torch.bool, [True, False, True]),
        (torch.uint8, [0, 1, 255]),
        (torch.int32, [-2**31, 0, 2**31 - 1]),
        (torch.int64, [-2**63, 0, 2**63 - 1]),
        (torch.float16, [-65504.0, 0.5, 1e-3]),
        (torch.bfloat16, [-3.0e38, 0.5, 7.0]),
        (torch.float32, [1e-30, -0.0, 3.5]),
        (torch.float64, [1e-300, -1.5, 2.0**60]),
    ]:
        t = torch.tensor(vals, dtype=d)
        dt[str(d).removeprefix("torch.")] = t
        dt[str(d).removeprefix("torch.") + "_offset"] = torch.tensor(vals * 2, dtype=d)[2:5]
    out["dtypes"] = dt
    lin = torch.nn.Linear(3, 2)
    bn = torch.nn.BatchNorm1d(2)
    seq = torch.nn.Sequential(lin, bn)
    out["state_dict"] = seq.state_dict()
    w = torch.nn.Parameter(torch.randn(2, 2))
    frozen = torch.nn.Parameter(torch.randn(3), requires_grad=False)
    base2 = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    out["single_view"] = base2[1:, ::2]
    out["single_scalar"] = torch.tensor(-7, dtype=torch.int64)
    out["single_5d"] = torch.arange(32, dtype=torch.int32).reshape(2, 2, 2, 2, 2)
    out["single_grad"] = torch.tensor([1.5, -2.0]).requires_grad_()
    out["single_offset_big"] = torch.arange(300, dtype=torch.uint8)[258:]
    out["params"] = {"w": w, "frozen": frozen, "w_view": w.data[1], "rg": torch.ones(2).requires_grad_()}
    return out


def describe(v, path, storages, acc):
    if isinstance(v, torch.Tensor):
        s = v.untyped_storage()
        key = storages.setdefault(s.data_ptr(), len(storages))
        acc.append({
            "path": path, "dtype": str(v.dtype).removeprefix("torch."), "shape": list(v.shape),
            "strides": list(v.stride()), "offset": v.storage_offset(),
            "data": [float(x) for x in v.detach().double().flatten().tolist()] if v.dtype != torch.int64
            else [int(x) for x in v.flatten().tolist()],
            "requires_grad": v.requires_grad, "is_param": isinstance(v, torch.nn.Parameter),
            "storage": key, "storage_numel": s.nbytes() // v.element_size(),
        })
    elif isinstance(v, dict):
        if not path and not v:
            return
        for k, x in v.items():
            describe(x, f"{path}/{k}", storages, acc)


def torch_cases():
    out = []
    for name, v in tensors().items():
        buf = io.BytesIO()
        torch.save(v, buf)
        raw = buf.getvalue()
        with open(os.path.join(HERE, name + ".pt"), "wb") as f:
            f.write(raw)
        acc = []
        describe(v, "", {}, acc)
        z = zipfile.ZipFile(io.BytesIO(raw))
        pkl_name = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
        pkl = pickletools.optimize(z.read(pkl_name))
        meta = None
        if hasattr(v, "_metadata"):
            meta = {k: dict(m) for k, m in v._metadata.items()}
        exact = not any(op.name in ("BINGET", "LONG_BINGET") for op, _, _ in pickletools.genops(pkl))
        entries = {}
        if exact:
            prefix = pkl_name[: -len("data.pkl")]
            entries = {n[len(prefix):]: z.read(n).hex() for n in z.namelist() if n.startswith(prefix + "data/")}
        out.append({"name": name, "tensors": acc, "pkl": pkl.hex(), "metadata": meta, "exact": exact,
                    "entries": entries})
    return out


def safetensors_case():
    """A safetensors file (dtypes ferrotorch's core has and lacks) and what
    its header says of each tensor, in data order, as PyTorch names dtypes."""
    import struct
    from safetensors.torch import save
    ts = {
        "w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
        "i8": torch.tensor([-1, 2], dtype=torch.int8),
        "u16": torch.tensor([1, 2, 3], dtype=torch.uint16),
        "f8": torch.zeros(4, dtype=torch.float8_e5m2),
        "flag": torch.tensor([True]),
        "h": torch.ones(1, 2, dtype=torch.float16),
    }
    raw = save(ts, metadata={"note": "x", "author": "y"})
    with open(os.path.join(HERE, "inspect.safetensors"), "wb") as f:
        f.write(raw)
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + n])
    meta = header.pop("__metadata__")
    items = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    # The views and dtypes files' tensors, made contiguous, with metadata.
    for name in ("views", "dtypes"):
        t = tensors()[name]
        raw2 = save({k: v.contiguous().clone() for k, v in t.items()}, metadata={"from": name})
        with open(os.path.join(HERE, name + ".safetensors"), "wb") as f:
            f.write(raw2)
    return {
        "tensors": [{"name": k, "dtype": str(ts[k].dtype).removeprefix("torch."), "shape": h["shape"],
                     "start": h["data_offsets"][0], "end": h["data_offsets"][1]} for k, h in items],
        "metadata": sorted(meta.items()),
    }


GLOBALS = """collections OrderedDict|collections Counter|torch._utils _rebuild_tensor_v2|torch._utils _rebuild_parameter|torch._utils _rebuild_parameter_with_state|torch.nn.parameter Parameter|torch Size|_codecs encode|builtins bytearray|__builtin__ bytearray|torch FloatStorage|torch BFloat16Storage|torch UntypedStorage|torch TypedStorage|torch CharStorage|torch FooStorage|builtins set|builtins complex|builtins frozenset|builtins dict|__builtin__ set|torch device|torch FloatTensor|torch per_tensor_affine|torch per_channel_affine|torch float32|torch complex64|torch complex32|torch qint8|torch quint2x4|torch float8_e4m3fn|torch float4_e2m1fn_x2|torch int4|torch uint|torch int|torch serialization|torch.serialization _get_layout|torch.serialization load|torch._utils _rebuild_qtensor|torch._utils _rebuild_sparse_tensor|torch._utils _rebuild_meta_tensor_no_storage|torch._utils _rebuild_tensor|torch._utils _rebuild_tensor_v3|torch._utils _rebuild_wrapper_subclass|torch._utils _rebuild_device_tensor_from_cpu_tensor|torch._utils other|torch._tensor _rebuild_from_type_v2|torch._tensor Tensor|torch.cuda FloatStorage|torch.cuda synchronize|os system|builtins eval|copy_reg _reconstructor|torch Tensor|torch bool|torch strided|torch sparse_coo|torch float|torch half|torch long|torch double|torch int32|torch int64|torch float16|torch float64|torch uint8|torch bfloat16|collections defaultdict|torch._utils _rebuild_device_tensor_from_numpy|torch LongTensor|torch.nn.parameter Buffer|torch._utils _rebuild_foo|copy_reg _reconstructor|torch Int4Storage|torch ShortStorage|torch ComplexFloatStorage|torch ComplexDoubleStorage|torch QInt8Storage|torch QUInt8Storage|torch QInt32Storage|torch QUInt4x2Storage|torch QUInt2x4Storage|torch BoolStorage|torch ByteStorage|torch IntStorage|torch LongStorage|torch HalfStorage|torch DoubleStorage|torch cuda""".split("|")


def global_cases():
    """Whether torch.load(weights_only=True)'s unpickler allows each global."""
    out = []
    for n in GLOBALS:
        module, name = n.split()
        p = f"\x80\x02c{module}\n{name}\n.".encode("latin1")
        out.append({"module": module, "name": name, "torch_allows": torch_reads(p) is True})
    return out


def main():
    cases = {"read": read_cases(), "write": write_cases(), "torch": torch_cases(), "globals": global_cases(),
             "safetensors": safetensors_case()}
    with open(os.path.join(HERE, "cases.json"), "w") as f:
        json.dump(cases, f, indent=0, ensure_ascii=True)
        f.write("\n")


if __name__ == "__main__":
    main()
