//! Bad input is a clear error, never a panic or an allocation the file does
//! not justify: wrong magic, truncation, missing entries, disallowed
//! globals, unknown dtypes, storages too short for their views, absurd
//! sizes, deep nesting, exponential sharing; and a mutation fuzz over the
//! real files.

mod common;

use std::io::Cursor;

use ferrotorch_serialize::{
    Error, Item, Key, LoadOptions, inspect_bytes, load_from_bytes, load_safetensors_from_bytes,
    load_state_dict_from_bytes,
};
use proptest::prelude::*;

use common::pt;

/// `_rebuild_tensor_v2` of storage `key` (`ty`, `numel` elements) with the
/// given offset, size and stride, as protocol-2 opcodes.
fn tensor_pkl(ty: &str, numel: i64, offset: i64, size: &[i64], stride: &[i64]) -> Vec<u8> {
    let mut p = b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(".to_vec();
    p.extend(b"(X\x07\x00\x00\x00storagectorch\n");
    p.extend(ty.as_bytes());
    p.extend(b"\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpu");
    int(&mut p, numel);
    p.extend(b"tQ");
    int(&mut p, offset);
    p.push(b'(');
    for &s in size {
        int(&mut p, s);
    }
    p.extend(b"t(");
    for &s in stride {
        int(&mut p, s);
    }
    p.extend(b"t\x89}tR.");
    p
}

/// A protocol-2 pickle of the global `module.name` alone.
fn global_pkl(module: &str, name: &str) -> Vec<u8> {
    let mut p = b"\x80\x02".to_vec();
    p.extend(format!("c{module}\n{name}\n.").bytes());
    p
}

fn int(p: &mut Vec<u8>, v: i64) {
    p.extend([0x8a, 8]);
    p.extend(v.to_le_bytes());
}

fn err(bytes: &[u8]) -> Error {
    match load_from_bytes(bytes) {
        Ok(v) => panic!("loaded {v:?}"),
        Err(e) => e,
    }
}

#[test]
fn wrong_magic_empty_and_legacy() {
    assert!(matches!(err(b""), Error::Format(m) if m.contains("0 bytes")));
    assert!(matches!(err(b"hello world, not a checkpoint"), Error::Format(m) if m.contains("not a torch.save")));
    let legacy = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.\x80\x02M\xe9\x03.";
    let e = err(legacy);
    assert!(matches!(e, Error::LegacyFormat), "{e}");
    assert!(e.to_string().contains("legacy"));
    let st = common::read("linear.safetensors");
    assert!(matches!(err(&st), Error::Format(m) if m.contains("safetensors")));
}

#[test]
fn every_truncation_of_a_real_file_is_an_error() {
    for name in ["linear_state_dict.pt", "adamw_state_dict.pt"] {
        let bytes = common::read(name);
        for n in 0..bytes.len() {
            assert!(load_from_bytes(&bytes[..n]).is_err(), "{name} cut at {n}");
            assert!(inspect_bytes(&bytes[..n]).is_err(), "inspect {name} cut at {n}");
        }
    }
    let st = common::read("linear.safetensors");
    for n in 0..st.len() {
        assert!(load_safetensors_from_bytes(&st[..n]).is_err(), "cut at {n}");
        assert!(inspect_bytes(&st[..n]).is_err(), "inspect cut at {n}");
    }
}

#[test]
fn missing_entries() {
    let mut z = zip::ZipWriter::new(Cursor::new(Vec::new()));
    z.start_file("archive/other", zip::write::SimpleFileOptions::default())
        .unwrap();
    let bytes = z.finish().unwrap().into_inner();
    assert!(matches!(err(&bytes), Error::Format(m) if m.contains("data.pkl")));
    let mut z = zip::ZipWriter::new(Cursor::new(Vec::new()));
    z.start_file("m/constants.pkl", zip::write::SimpleFileOptions::default())
        .unwrap();
    let bytes = z.finish().unwrap().into_inner();
    assert!(matches!(err(&bytes), Error::Format(m) if m.contains("TorchScript")));
    // The pickle names storage 0, the archive lacks it.
    let e = err(&pt(&tensor_pkl("FloatStorage", 3, 0, &[3], &[1]), &[]));
    assert!(matches!(&e, Error::Format(m) if m.contains("archive/data/0")), "{e}");
}

#[test]
fn disallowed_globals_name_the_global_and_run_nothing() {
    for (module, name) in [
        ("posix", "system"),
        ("builtins", "eval"),
        ("__builtin__", "exec"),
        ("torch", "load"),
    ] {
        let mut pkl = b"\x80\x02".to_vec();
        pkl.extend(format!("c{module}\n{name}\nX\x02\x00\x00\x00ls").bytes());
        pkl.extend(b"\x85R.");
        let e = err(&pt(&pkl, &[]));
        let want = format!("{}.{name}", if module == "__builtin__" { "builtins" } else { module });
        assert!(matches!(&e, Error::DisallowedGlobal(g) if *g == want), "{e}");
        assert!(e.to_string().contains("weights_only=True"));
    }
    // `set` and `complex` pass PyTorch's weights_only unpickler; ferrotorch
    // has no value for them, and says so (not "disallowed").
    for name in ["set", "complex"] {
        for module in ["builtins", "__builtin__"] {
            let e = err(&pt(&global_pkl(module, name), &[]));
            assert!(
                matches!(&e, Error::Unsupported(m) if m.contains(&format!("builtins.{name}"))),
                "{module}.{name}: {e}"
            );
        }
    }
    // Other builtins stay disallowed.
    let e = err(&pt(b"\x80\x02cbuiltins\nfrozenset\n.", &[]));
    assert!(
        matches!(&e, Error::DisallowedGlobal(g) if g == "builtins.frozenset"),
        "{e}"
    );
    // Allowed by PyTorch, but nothing ferrotorch can hold.
    let e = err(&pt(b"\x80\x02ctorch\nfloat32\n.", &[]));
    assert!(
        matches!(&e, Error::Unsupported(m) if m.contains("torch.float32")),
        "{e}"
    );
}

#[test]
fn dtypes_the_core_lacks() {
    let e = err(&pt(&tensor_pkl("ShortStorage", 2, 0, &[2], &[1]), &[("0", &[0; 4])]));
    assert!(matches!(&e, Error::Unsupported(m) if m.contains("torch.int16")), "{e}");
    let e = err(&pt(&tensor_pkl("EvilStorage", 2, 0, &[2], &[1]), &[("0", &[0; 4])]));
    assert!(
        matches!(&e, Error::DisallowedGlobal(g) if g == "torch.EvilStorage"),
        "{e}"
    );
}

#[test]
fn views_must_fit_their_storage() {
    let data = [0u8; 48];
    let ok = load_from_bytes(&pt(
        &tensor_pkl("FloatStorage", 12, 2, &[2, 5], &[5, 1]),
        &[("0", &data)],
    ))
    .unwrap();
    assert_eq!(ok.as_tensor().unwrap().shape(), &[2, 5]);
    for (offset, size, stride) in [
        (0, vec![100], vec![1]),
        (12, vec![1], vec![1]),
        (0, vec![3, 4], vec![5, 1]),
        (3, vec![2, 5], vec![5, 1]),
        (0, vec![1 << 62, 1 << 62], vec![1, 1]),
        (0, vec![2, 2], vec![1 << 62, 1 << 62]),
        (i64::MAX, vec![1], vec![1]),
        (-1, vec![1], vec![1]),
        (0, vec![-1], vec![1]),
        (0, vec![2], vec![-1]),
        (0, vec![2, 2], vec![1]),
    ] {
        let e = err(&pt(
            &tensor_pkl("FloatStorage", 12, offset, &size, &stride),
            &[("0", &data)],
        ));
        assert!(
            matches!(e, Error::InvalidTensor(_)),
            "{offset} {size:?} {stride:?}: {e}"
        );
    }
    // The storage's entry must hold numel elements exactly: an absurd numel
    // is refused before anything is allocated.
    for numel in [13, 11, 1 << 60, i64::MAX] {
        let e = err(&pt(&tensor_pkl("FloatStorage", numel, 0, &[1], &[1]), &[("0", &data)]));
        assert!(matches!(e, Error::InvalidTensor(_)), "{numel}: {e}");
    }
    // Inspection checks the same layouts, against the storage size the
    // pickle declares, and allocates nothing for it: a 4 EiB storage is
    // described (and cannot load: the archive has no such entry).
    let huge = pt(
        &tensor_pkl("FloatStorage", 1 << 60, 0, &[1 << 30, 1 << 30], &[1 << 30, 1]),
        &[],
    );
    let info = inspect_bytes(&huge).unwrap();
    let Item::Tensor(t) = &info.entries[0].item else {
        panic!("{info:?}")
    };
    assert_eq!(
        (t.shape.as_slice(), t.nbytes),
        (&[1usize << 30, 1 << 30][..], 1u64 << 62)
    );
    assert_eq!(info.data_bytes(), 1 << 62);
    assert!(load_from_bytes(&huge).is_err());
    for (numel, size) in [(12, vec![13]), (i64::MAX, vec![1]), (1 << 62, vec![1])] {
        let e = inspect_bytes(&pt(&tensor_pkl("FloatStorage", numel, 0, &size, &[1]), &[])).unwrap_err();
        assert!(matches!(e, Error::InvalidTensor(_)), "{numel}: {e}");
    }
    // A bool storage may only hold 0 and 1.
    let e = err(&pt(&tensor_pkl("BoolStorage", 2, 0, &[2], &[1]), &[("0", &[1, 2])]));
    assert!(matches!(e, Error::InvalidTensor(_)), "{e}");
}

#[test]
fn malformed_pickles() {
    let cases: &[(&[u8], &str)] = &[
        (b"\x80\x02", "STOP"),
        (b"\x80\x02a.", "underflow"),
        (b"\x80\x02h\x05.", "memo"),
        (b"\x80\x02X\xff\xff\xff\x7f.", "length"),
        (b"\x80\x02\x8d\xff\xff\xff\xff\xff\xff\xff\xff.", "length"),
        (b"\x80\x02\x8b\xff\xff\xff\x7f.", "length"),
        (b"\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.", "64 bits"),
        (b"\x80\x02K\x00K\x01K\x02s.", "SETITEM"),
        (b"\x80\x02u.", "MARK"),
        (b"\x80\x02I1\n.", "opcode"),
        (b"\x80\x09N.", "protocol"),
        (b"\x80\x06N.", "unsupported pickle protocol 6"),
        (b"\x80\x02X\x02\x00\x00\x00\xff\xfe.", "UTF-8"),
        (b"\x80\x02}]K\x01s.", "dict key"),
        (b"\x80\x02N)R.", "not a global"),
    ];
    for (pkl, want) in cases {
        let e = err(&pt(pkl, &[]));
        assert!(e.to_string().contains(want), "{pkl:?}: {e}");
    }
    // `bytearray` as Python's pickle writes it (`pickle.dumps(bytearray(b''),
    // p)` and `bytearray(b'ab')` for protocols 2, 3 and 4): with no argument
    // it is empty; `_codecs.encode()` needs one (Python: TypeError).
    // Protocol 0's text opcodes (`p0` here) are refused, as PyTorch's
    // weights-only unpickler refuses them.
    let bytearrays: [(&[u8], &[u8]); 5] = [
        (b"\x80\x02c__builtin__\nbytearray\nq\x00)Rq\x01.", b""),
        (b"\x80\x03cbuiltins\nbytearray\nq\x00)Rq\x01.", b""),
        (
            b"\x80\x02c__builtin__\nbytearray\nq\x00c_codecs\nencode\nq\x01X\x02\x00\x00\x00abq\x02X\x06\x00\x00\x00latin1q\x03\x86q\x04Rq\x05\x85q\x06Rq\x07.",
            b"ab",
        ),
        (b"\x80\x03cbuiltins\nbytearray\nq\x00C\x02abq\x01\x85q\x02Rq\x03.", b"ab"),
        (
            b"\x80\x04\x95\x1d\x00\x00\x00\x00\x00\x00\x00\x8c\x08builtins\x94\x8c\tbytearray\x94\x93\x94)R\x94.",
            b"",
        ),
    ];
    for (pkl, want) in bytearrays {
        let v = load_from_bytes(&pt(pkl, &[])).unwrap_or_else(|e| panic!("{pkl:?}: {e}"));
        assert!(
            matches!(&v, ferrotorch_serialize::Value::Bytes(b) if b == want),
            "{pkl:?}: {v:?}"
        );
    }
    let e = err(&pt(b"c__builtin__\nbytearray\np0\n(tRp1\n.", &[]));
    assert!(e.to_string().contains("opcode 0x70"), "{e}");
    let e = err(&pt(b"\x80\x02c_codecs\nencode\n)R.", &[]));
    assert!(e.to_string().contains("_codecs.encode"), "{e}");
    // Every protocol Python writes (0 has no PROTO opcode; 2 to 5 have one).
    for pkl in [&b"N."[..], b"\x80\x02N.", b"\x80\x03N.", b"\x80\x04N.", b"\x80\x05N."] {
        let v = load_from_bytes(&pt(pkl, &[])).unwrap_or_else(|e| panic!("{pkl:?}: {e}"));
        assert!(matches!(v, ferrotorch_serialize::Value::None), "{pkl:?}: {v:?}");
    }
}

#[test]
fn ordered_dict_from_a_list_of_pairs() {
    // `OrderedDict([("a", 1), ("b", 2)])` reduced with its one argument
    // (older pickles; torch.save itself reduces with no argument and SETITEMS).
    let one = b"\x80\x02ccollections\nOrderedDict\n((X\x01\x00\x00\x00aK\x01t(X\x01\x00\x00\x00bK\x02tl\x85R.";
    let v = load_from_bytes(&pt(one, &[])).unwrap();
    let d = v.as_dict().unwrap();
    assert!(d.is_ordered_dict());
    let items: Vec<(Key, i64)> = d.iter().map(|(k, v)| (k.clone(), v.as_i64().unwrap())).collect();
    assert_eq!(items, [(Key::Str("a".into()), 1), (Key::Str("b".into()), 2)]);
    // No argument: empty.
    let none = b"\x80\x02ccollections\nOrderedDict\n)R.";
    assert!(load_from_bytes(&pt(none, &[])).unwrap().as_dict().unwrap().is_empty());
    // Two arguments, or items that are not pairs, are errors.
    let two = b"\x80\x02ccollections\nOrderedDict\n(]]tR.";
    assert!(err(&pt(two, &[])).to_string().contains("at most one argument"));
    let triple = b"\x80\x02ccollections\nOrderedDict\n((K\x01K\x02K\x03tl\x85R.";
    assert!(err(&pt(triple, &[])).to_string().contains("pairs"));
}

#[test]
fn deep_nesting_and_exponential_sharing_are_bounded() {
    // 100000 nested lists: the nesting limit, not a stack overflow.
    let n = 100_000;
    let mut p = b"\x80\x02".to_vec();
    p.extend(std::iter::repeat_n(b']', n));
    p.extend(std::iter::repeat_n(b'a', n - 1));
    p.push(b'.');
    let e = err(&pt(&p, &[]));
    assert!(e.to_string().contains("deeper"), "{e}");
    // A list holding itself.
    let e = err(&pt(b"\x80\x02]q\x00h\x00a.", &[]));
    assert!(e.to_string().contains("deeper"), "{e}");
    // Every container counts a level: {0: {0: ...}} and ((...,),).
    let mut p = b"\x80\x02".to_vec();
    for _ in 1..n {
        p.extend(b"}K\x00");
    }
    p.push(b'}');
    p.extend(std::iter::repeat_n(b's', n - 1));
    p.push(b'.');
    let e = err(&pt(&p, &[]));
    assert!(e.to_string().contains("deeper"), "{e}");
    let e = err(&pt(b"\x80\x02}q\x00K\x00h\x00s.", &[]));
    assert!(e.to_string().contains("deeper"), "{e}");
    let mut p = b"\x80\x02)".to_vec();
    p.extend(std::iter::repeat_n(0x85u8, n));
    p.push(b'.');
    let e = err(&pt(&p, &[]));
    assert!(e.to_string().contains("deeper"), "{e}");
    // Just under the limit still loads.
    let depth = ferrotorch_serialize::MAX_DEPTH - 1;
    let mut p = b"\x80\x02".to_vec();
    for _ in 0..depth {
        p.extend(b"}K\x00");
    }
    p.push(b'}');
    p.extend(std::iter::repeat_n(b's', depth));
    p.push(b'.');
    let mut v = load_from_bytes(&pt(&p, &[])).unwrap();
    let mut levels = 0;
    while let Some(inner) = v.as_dict().and_then(|d| d.get_int(0)).cloned() {
        v = inner;
        levels += 1;
    }
    assert_eq!(levels, depth);
    // l0 = [], l1 = [l0, l0], ..., l60: 2^60 leaves if expanded.
    let mut p = b"\x80\x02]q\x00".to_vec();
    for i in 1..=60u8 {
        p.extend([b'(', b'h', i - 1, b'h', i - 1, b'l', b'q', i]);
    }
    p.push(b'.');
    let e = err(&pt(&p, &[]));
    assert!(e.to_string().contains("too many"), "{e}");
    // A 1 MB string referenced 200000 times (200 GB if each were a copy).
    let mut p = b"\x80\x02X\x40\x42\x0f\x00".to_vec();
    p.extend(std::iter::repeat_n(b'x', 1_000_000));
    p.extend(b"q\x00(");
    for _ in 0..200_000 {
        p.extend(b"h\x00");
    }
    p.extend(b"l.");
    let e = err(&pt(&p, &[]));
    assert!(e.to_string().contains("too many bytes"), "{e}");
}

/// Mutations of a real file: flipped bytes, overwritten words (with
/// extreme values), truncation, and inserted bytes.
fn mutate(mut bytes: Vec<u8>, ops: &[(u8, usize, u64)]) -> Vec<u8> {
    for &(kind, at, v) in ops {
        if bytes.is_empty() {
            break;
        }
        let i = at % bytes.len();
        match kind % 4 {
            0 => bytes[i] ^= (v as u8) | 1,
            1 => {
                let w = [0u64, u32::MAX as u64, u64::MAX, 1 << 40, v][(v % 5) as usize].to_le_bytes();
                let end = (i + 4).min(bytes.len());
                bytes[i..end].copy_from_slice(&w[..end - i]);
            }
            2 => bytes.truncate(i),
            _ => bytes.insert(i, v as u8),
        }
    }
    bytes
}

/// The pickle region of a file, so that mutations also hit the VM (not
/// only the zip directory).
fn pkl_range(bytes: &[u8]) -> std::ops::Range<usize> {
    let start = bytes.windows(2).position(|w| w == b"\x80\x02").unwrap_or(0);
    start..bytes.len().min(start + 800)
}

proptest! {
    // 512 cases by default; PROPTEST_CASES=n runs a longer fuzz.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_real_files_never_panic(
        file in 0usize..5,
        ops in proptest::collection::vec((any::<u8>(), any::<usize>(), any::<u64>()), 1..6),
        in_pickle in any::<bool>(),
    ) {
        let names = ["linear_state_dict.pt", "adamw_state_dict.pt", "linear_and_adamw.pt", "linear.safetensors",
                     "torch_written/checkpoint.pt"];
        let bytes = if file == 4 { common::read_local(names[file]) } else { common::read(names[file]) };
        let bytes = if in_pickle {
            let r = pkl_range(&bytes);
            let ops: Vec<_> = ops.iter().map(|&(k, at, v)| (k & !2, r.start + at % r.len().max(1), v)).collect();
            mutate(bytes, &ops)
        } else {
            mutate(bytes, &ops)
        };
        let _ = load_from_bytes(&bytes);
        let _ = load_safetensors_from_bytes(&bytes);
        let _ = load_state_dict_from_bytes(&bytes, &LoadOptions::new());
        let _ = inspect_bytes(&bytes);
        // One case in 16 also through a file: the loaders that borrow its map.
        if ops[0].2 % 16 == 0 {
            let path = std::env::temp_dir().join(format!("ferrotorch-fuzz-{}-{:?}.bin", std::process::id(), std::thread::current().id()));
            std::fs::write(&path, &bytes).unwrap();
            let _ = ferrotorch_serialize::load(&path);
            let _ = ferrotorch_serialize::load_safetensors(&path);
            let _ = ferrotorch_serialize::inspect(&path);
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// `_rebuild_tensor_v2`'s backward hooks and metadata: empty (an empty
/// dict, `None`) loads; a non-empty one (a hook or a conjugate bit that
/// ferrotorch cannot carry) is refused as unsupported, never dropped.
#[test]
fn tensor_hooks_and_metadata_must_be_empty() {
    let base = tensor_pkl("FloatStorage", 3, 0, &[3], &[1]);
    let tail = b"\x89}tR.";
    assert!(base.ends_with(tail));
    let with = |args: &[u8]| {
        let mut p = base[..base.len() - tail.len()].to_vec();
        p.push(0x89);
        p.extend(args);
        p.extend(b"tR.");
        pt(&p, &[("0", &[0; 12])])
    };
    let one = b"}X\x01\x00\x00\x00aK\x01s";
    for ok in [&b"}"[..], b"N", b"}}", b"}N"] {
        let v = load_from_bytes(&with(ok)).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        assert!(
            matches!(&v, ferrotorch_serialize::Value::Tensor(t) if t.shape() == [3]),
            "{v:?}"
        );
    }
    let e = err(&with(one));
    assert!(
        matches!(&e, Error::Unsupported(m) if m.contains("backward hooks")),
        "{e}"
    );
    let mut meta = b"}".to_vec();
    meta.extend(one);
    let e = err(&with(&meta));
    assert!(matches!(&e, Error::Unsupported(m) if m.contains("metadata")), "{e}");
}

/// The dtypes PyTorch's weights-only unpickler accepts but ferrotorch has
/// no dtype for (the sub-byte `int1`-`int7` / `uint1`-`uint7`, float8 and
/// float4 kinds) are refused as unsupported, naming the global, not as
/// disallowed.
#[test]
fn torch_only_dtypes_are_unsupported_not_disallowed() {
    for name in [
        "int1",
        "int4",
        "int7",
        "uint1",
        "uint3",
        "uint7",
        "float8_e4m3fn",
        "float8_e5m2",
        "float4_e2m1fn_x2",
    ] {
        let e = err(&pt(&global_pkl("torch", name), &[]));
        assert!(
            matches!(&e, Error::Unsupported(m) if m.contains(&format!("torch.{name}"))),
            "torch.{name}: {e}"
        );
    }
    // Names that only look like them stay disallowed.
    for name in ["intx", "uint_8", "int8x", "int-4"] {
        let e = err(&pt(&global_pkl("torch", name), &[]));
        assert!(
            matches!(&e, Error::DisallowedGlobal(g) if g == &format!("torch.{name}")),
            "torch.{name}: {e}"
        );
    }
}
