//! The `ferrotorch` command (`src/bin/ferrotorch`): `inspect` of the files
//! PyTorch wrote (`crates/serialize/tests/data`), without reading tensor
//! data; `convert` both ways with bitwise round trips; bad input is a
//! message and a nonzero exit status, never a panic.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ferrotorch::Tensor;
use ferrotorch::serialize::{Dict, Item, Value, inspect, load, load_safetensors, save, save_safetensors};
use serde_json::Value as Json;

/// A folder removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("ferrotorch-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A file of `crates/serialize/tests/data`.
fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/serialize/tests/data")
        .join(name)
}

/// Arguments of any kind: `&[&"inspect", &path]`.
type Args<'a> = [&'a dyn AsRef<OsStr>];

fn run(args: &Args) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferrotorch"))
        .args(args.iter().map(|a| a.as_ref()))
        .output()
        .unwrap()
}

/// Runs a command that must succeed; its stdout.
fn ok(args: &Args) -> String {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status.code());
    String::from_utf8(out.stdout).unwrap()
}

/// Runs a command that must fail with `code`; its stderr, checked to be a
/// message (not a panic).
fn fails(args: &Args, code: i32) -> String {
    let out = run(args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    assert!(stderr.starts_with("ferrotorch: "), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
    stderr
}

/// `inspect --json` of `path`, parsed.
fn inspect_json(path: &Path) -> Json {
    serde_json::from_str(&ok(&[&"inspect", &"--json", &path])).unwrap()
}

/// The row of the table whose first column is `name`, split into cells.
fn row(table: &str, name: &str) -> Vec<String> {
    let line = table
        .lines()
        .find(|l| l.split("  ").next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"));
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn inspect_lists_a_training_checkpoint() {
    let table = ok(&[&"inspect", &data("torch_written/checkpoint.pt")]);
    assert!(
        table
            .lines()
            .next()
            .unwrap()
            .ends_with("torch.save checkpoint, 8 tensors in 8 storages, 36 other values")
    );
    assert_eq!(
        row(&table, "model_state_dict.weight"),
        ["model_state_dict.weight", "float32", "[3, 4]", "48"]
    );
    assert_eq!(
        row(&table, "model_state_dict.bias"),
        ["model_state_dict.bias", "float32", "[3]", "12"]
    );
    assert_eq!(
        row(&table, "optimizer_state_dict.state.0.exp_avg"),
        ["optimizer_state_dict.state.0.exp_avg", "float32", "[3, 4]", "48"]
    );
    assert_eq!(
        row(&table, "optimizer_state_dict.state.1.step"),
        ["optimizer_state_dict.state.1.step", "float32", "[]", "4"]
    );
    assert_eq!(row(&table, "epoch"), ["epoch", "int", "= 3"]);
    assert_eq!(row(&table, "loss"), ["loss", "float", "= 0.12"]);
    assert_eq!(row(&table, "name"), ["name", "str", "= 'run'"]);
    assert_eq!(row(&table, "flags"), ["flags", "list", "= [True, False, None]"]);
    assert_eq!(row(&table, "bytes"), ["bytes", "bytes", r"= b'\x00\xffab'"]);
    assert_eq!(
        row(&table, "optimizer_state_dict.param_groups.0.betas")[2],
        "= (0.9, 0.999)"
    );
    assert_eq!(row(&table, "optimizer_state_dict.param_groups.0.eps")[2], "= 1e-08");
    assert_eq!(row(&table, "nested.a.b.1.c")[2], "= 2");
    assert_eq!(row(&table, "inf")[2], "= -inf");
    assert!(table.ends_with("total: 8 tensors, 188 bytes\n"), "{table}");
}

#[test]
fn inspect_json_names_every_dtype() {
    let j = inspect_json(&data("torch_written/dtypes.pt"));
    assert_eq!(j["format"], "torch.save");
    let entries = j["entries"].as_array().unwrap();
    let want = [
        ("bool", 1),
        ("uint8", 1),
        ("int32", 4),
        ("int64", 8),
        ("float16", 2),
        ("bfloat16", 2),
        ("float32", 4),
        ("float64", 8),
    ];
    assert_eq!(entries.len(), want.len());
    for (e, (dtype, size)) in entries.iter().zip(want) {
        assert_eq!(e["name"], dtype);
        assert_eq!(e["type"], "tensor");
        assert_eq!(e["dtype"], dtype);
        assert_eq!(e["shape"], serde_json::json!([3, 4]));
        assert_eq!(e["bytes"], 12 * size);
        assert_eq!(e["stride"], serde_json::json!([4, 1]));
    }
    assert_eq!(j["tensor_bytes"], 12 * 30);
}

#[test]
fn inspect_shows_views_sharing_a_storage() {
    let path = data("torch_written/views.pt");
    let j = inspect_json(&path);
    assert_eq!(
        j["storages"],
        serde_json::json!([{"key": "0", "bytes": 96, "tensors": 6}])
    );
    let t = &j["entries"][1];
    assert_eq!((t["name"].as_str(), t["storage"].as_str()), (Some("t"), Some("0")));
    assert_eq!(t["stride"], serde_json::json!([1, 6]));
    let slice = &j["entries"][2];
    assert_eq!(slice["storage_offset"], 8);
    assert_eq!(
        (j["tensor_bytes"].as_u64(), j["data_bytes"].as_u64()),
        (Some(304), Some(96))
    );
    let table = ok(&[&"inspect", &path]);
    assert_eq!(row(&table, "base")[4], "storage 0, shared by 6 tensors");
    assert_eq!(row(&table, "t")[4], "shares storage 0 with base");
    assert!(table.ends_with("total: 6 tensors, 304 bytes; the storages hold 96 bytes\n"));
    let param = ok(&[&"inspect", &data("torch_written/parameter.pt")]);
    assert_eq!(row(&param, "p"), ["p", "float32", "[2, 2]", "16", "requires_grad"]);
}

#[test]
fn inspect_reads_safetensors_headers_and_metadata() {
    let table = ok(&[&"inspect", &data("torch_written/st.safetensors")]);
    assert!(table.contains("__metadata__ note: by hand\n"), "{table}");
    assert_eq!(row(&table, "b"), ["b", "int64", "[3, 4]", "96"]);
    assert_eq!(row(&table, "c"), ["c", "bfloat16", "[3, 4]", "24"]);
    let j = inspect_json(&data("torch_written/st.safetensors"));
    assert_eq!(j["format"], "safetensors");
    assert_eq!(j["metadata"], serde_json::json!({"note": "by hand"}));
    assert_eq!(j["entries"][1]["data_offsets"], serde_json::json!([48, 144]));
}

/// The entries `inspect` reports agree with what `load` reads, for every
/// checkpoint PyTorch wrote.
#[test]
fn inspect_agrees_with_load() {
    let files = [
        "linear_state_dict.pt",
        "adamw_state_dict.pt",
        "linear_and_adamw.pt",
        "linear.safetensors",
        "torch_written/checkpoint.pt",
        "torch_written/dtypes.pt",
        "torch_written/empty.pt",
        "torch_written/parameter.pt",
        "torch_written/proto4.pt",
        "torch_written/views.pt",
        "torch_written/st.safetensors",
    ];
    for f in files {
        let path = data(f);
        let info = inspect(&path).unwrap();
        let loaded: Vec<(String, Value)> = if f.ends_with(".safetensors") {
            let st = load_safetensors(&path).unwrap();
            st.tensors
                .iter()
                .map(|(n, t)| (n.to_string(), Value::Tensor(t.clone())))
                .collect()
        } else {
            let v = load(&path).unwrap();
            v.leaves().into_iter().map(|(n, v)| (n, v.clone())).collect()
        };
        assert_eq!(info.entries.len(), loaded.len(), "{f}");
        for (e, (name, v)) in info.entries.iter().zip(&loaded) {
            assert_eq!(&e.name, name, "{f}");
            match (&e.item, v) {
                (Item::Tensor(i), Value::Tensor(t)) => {
                    assert_eq!(i.dtype, t.dtype().name(), "{f} {name}");
                    assert_eq!(i.shape, t.shape(), "{f} {name}");
                    assert_eq!(i.nbytes, (t.numel() * t.element_size()) as u64, "{f} {name}");
                    assert_eq!(i.requires_grad, t.requires_grad(), "{f} {name}");
                }
                (Item::Value(a), b) => assert!(a.same(b), "{f} {name}: {a} vs {b}"),
                _ => panic!("{f} {name}: a tensor on one side only"),
            }
        }
    }
}

/// The local file header of the zip entry `name` in `bytes`: where its
/// data starts.
fn entry_data_start(bytes: &[u8], name: &str) -> usize {
    let mut at = 0;
    loop {
        let off = at
            + bytes[at..]
                .windows(4)
                .position(|w| w == b"PK\x03\x04")
                .expect("no such entry");
        let n = u16::from_le_bytes([bytes[off + 26], bytes[off + 27]]) as usize;
        let m = u16::from_le_bytes([bytes[off + 28], bytes[off + 29]]) as usize;
        if &bytes[off + 30..off + 30 + n] == name.as_bytes() {
            return off + 30 + n + m;
        }
        at = off + 4;
    }
}

/// `inspect` reads the pickle only: a file whose storage bytes are
/// garbage (a bool storage holding 0xAB: `load` refuses it), and a file
/// whose storage entries are gone, inspect exactly as the intact file.
#[test]
fn inspect_does_not_read_storages() {
    let dir = TempDir::new("no-read");
    let src = data("torch_written/dtypes.pt");
    let want = ok(&[&"inspect", &src]);
    let info = inspect(&src).unwrap();
    let clean = std::fs::read(&src).unwrap();

    let mut corrupt = clean.clone();
    for s in &info.storages {
        let start = entry_data_start(&clean, &format!("dtypes/data/{}", s.key));
        corrupt[start..start + s.nbytes as usize].fill(0xab);
    }
    let path = dir.join("corrupt.pt");
    std::fs::write(&path, &corrupt).unwrap();
    assert!(load(&path).is_err(), "the corruption must be visible to load");
    let got = ok(&[&"inspect", &path]);
    assert_eq!(
        got.lines().skip(1).collect::<Vec<_>>(),
        want.lines().skip(1).collect::<Vec<_>>()
    );

    // Renaming every `dtypes/data/K` entry (local headers and directory).
    let mut gone = clean.clone();
    let mut renamed = 0;
    for i in 0..gone.len() - 6 {
        if &gone[i..i + 6] == b"/data/" {
            gone[i + 4] = b'X';
            renamed += 1;
        }
    }
    assert_eq!(renamed, 2 * info.storages.len());
    let path = dir.join("no_storages.pt");
    std::fs::write(&path, &gone).unwrap();
    let err = load(&path).unwrap_err().to_string();
    assert!(err.contains("no entry dtypes/data/"), "{err}");
    let got = ok(&[&"inspect", &path]);
    assert_eq!(
        got.lines().skip(1).collect::<Vec<_>>(),
        want.lines().skip(1).collect::<Vec<_>>()
    );
}

/// A safetensors file declaring 4 GiB of data (a sparse file: nothing to
/// read there) inspects from its header alone.
#[test]
fn inspect_reads_only_a_safetensors_header() {
    let dir = TempDir::new("sparse");
    let n: u64 = 1 << 32;
    let mut header = format!("{{\"w\":{{\"dtype\":\"F32\",\"shape\":[32768,32768],\"data_offsets\":[0,{n}]}}}}");
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let path = dir.join("big.safetensors");
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    std::fs::write(&path, &bytes).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(bytes.len() as u64 + n)
        .unwrap();
    let table = ok(&[&"inspect", &path]);
    assert_eq!(row(&table, "w"), ["w", "float32", "[32768, 32768]", "4294967296"]);
    assert!(
        table.ends_with("total: 1 tensor, 4294967296 bytes (4.0 GiB)\n"),
        "{table}"
    );
}

/// Whether two tensors have the same dtype, shape and element bits
/// (compared as f64, which holds every element of every core dtype
/// exactly: -0.0 and NaN bits included).
fn bitwise_equal(a: &Tensor, b: &Tensor) -> bool {
    let bits = |t: &Tensor| -> Vec<u64> { t.to_vec::<f64>().unwrap().iter().map(|x| x.to_bits()).collect() };
    a.dtype() == b.dtype() && a.shape() == b.shape() && bits(a) == bits(b)
}

#[test]
fn convert_round_trips_pt_and_safetensors_bitwise() {
    let dir = TempDir::new("roundtrip");
    for f in [
        "torch_written/dtypes.pt",
        "torch_written/views.pt",
        "torch_written/empty.pt",
        "linear_state_dict.pt",
    ] {
        let src = data(f);
        let st = dir.join("x.safetensors");
        let back = dir.join("x.pt");
        let said = ok(&[&"convert", &src, &st]);
        assert!(
            said.contains("(torch.save) -> ") && said.contains("(safetensors)"),
            "{said}"
        );
        ok(&[&"convert", &st, &back]);
        let orig = load(&src).unwrap();
        let orig = orig.as_dict().unwrap();
        let via_st = load_safetensors(&st).unwrap();
        assert_eq!(via_st.metadata.get("format").map(String::as_str), Some("pt"));
        let again = load(&back).unwrap();
        let again = again.as_dict().unwrap();
        assert!(again.is_ordered_dict(), "{f}: a state dict is an OrderedDict");
        assert_eq!(orig.len(), via_st.tensors.len(), "{f}");
        assert_eq!(orig.len(), again.len(), "{f}");
        for (k, v) in orig.iter() {
            let ferrotorch::serialize::Key::Str(name) = k else {
                panic!()
            };
            let t = v.as_tensor().unwrap();
            assert!(
                bitwise_equal(t, via_st.tensors.get(name).unwrap()),
                "{f} {name} in safetensors"
            );
            let back_t = again.get_str(name).and_then(Value::as_tensor).unwrap();
            assert!(bitwise_equal(t, back_t), "{f} {name} back in .pt");
        }
    }
}

#[test]
fn convert_safetensors_to_pt_and_back_keeps_metadata_where_it_can() {
    let dir = TempDir::new("st");
    let src = data("torch_written/st.safetensors");
    let pt = dir.join("st.pth");
    let said = ok(&[&"convert", &src, &pt]);
    assert!(
        said.contains("note: the __metadata__ of") && said.contains("(note)"),
        "{said}"
    );
    let copy = dir.join("copy.safetensors");
    ok(&[&"convert", &src, &copy]);
    let st = load_safetensors(&copy).unwrap();
    assert_eq!(st.metadata.get("note").map(String::as_str), Some("by hand"));
    let back = dir.join("back.safetensors");
    ok(&[&"convert", &pt, &back]);
    let orig = load_safetensors(&src).unwrap();
    let back = load_safetensors(&back).unwrap();
    for (name, t) in orig.tensors.iter() {
        assert!(bitwise_equal(t, back.tensors.get(name).unwrap()), "{name}");
    }
    // --to overrides the extension.
    let odd = dir.join("weights.data");
    ok(&[&"convert", &"--to", &"pt", &src, &odd]);
    assert_eq!(load(&odd).unwrap().as_dict().unwrap().len(), 3);
}

#[test]
fn convert_refuses_a_training_checkpoint_unless_told_how() {
    let dir = TempDir::new("ckpt");
    let src = data("torch_written/checkpoint.pt");
    let out = dir.join("model.safetensors");
    let err = fails(&[&"convert", &src, &out], 1);
    assert!(err.contains("is not a flat state dict"), "{err}");
    assert!(err.contains("epoch (int)") && err.contains("loss (float)"), "{err}");
    assert!(
        err.contains("--key model_state_dict") && err.contains("--flatten"),
        "{err}"
    );
    assert!(!out.exists());

    ok(&[&"convert", &"--key", &"model_state_dict", &src, &out]);
    let st = load_safetensors(&out).unwrap();
    let names: Vec<&str> = st.tensors.keys().collect();
    assert_eq!(names, ["bias", "weight"]);
    let full = load(&src).unwrap();
    let model = full
        .as_dict()
        .unwrap()
        .get_str("model_state_dict")
        .unwrap()
        .as_dict()
        .unwrap();
    let w = model.get_str("weight").and_then(Value::as_tensor).unwrap();
    assert!(bitwise_equal(w, st.tensors.get("weight").unwrap()));

    let err = fails(&[&"convert", &"--key=nope", &src, &out], 1);
    assert!(
        err.contains("no top-level entry 'nope'") && err.contains("'model_state_dict'"),
        "{err}"
    );

    let flat = dir.join("all.safetensors");
    let said = ok(&[&"convert", &"--flatten", &src, &flat]);
    assert!(
        said.contains("8 tensors") && said.contains("note: dropped 36 values"),
        "{said}"
    );
    let st = load_safetensors(&flat).unwrap();
    let exp_avg = st.tensors.get("optimizer_state_dict.state.0.exp_avg").unwrap();
    assert_eq!(exp_avg.shape(), [3, 4]);
    assert!(st.tensors.get("model_state_dict.bias").is_some());
}

#[test]
fn a_pt_to_pt_conversion_has_no_metadata_note() {
    // A .pt input's only metadata is {"format": "pt"}: nothing is lost
    // writing .pt, so nothing is said; other metadata is named.
    let dir = TempDir::new("ptpt");
    let src = data("torch_written/st.safetensors");
    let pt = dir.join("a.pt");
    ok(&[&"convert", &src, &pt]);
    let again = dir.join("b.pt");
    let said = ok(&[&"convert", &pt, &again]);
    assert!(!said.contains("note"), "{said}");
    let only_format = dir.join("only_format.safetensors");
    let sd = load_safetensors(&src).unwrap().tensors;
    let meta = std::collections::HashMap::from([("format".to_string(), "pt".to_string())]);
    save_safetensors(&sd, Some(&meta), &only_format).unwrap();
    let said = ok(&[&"convert", &only_format, &dir.join("c.pt")]);
    assert!(!said.contains("note"), "{said}");
    let other = dir.join("other.safetensors");
    let meta = std::collections::HashMap::from([("format".to_string(), "np".to_string())]);
    save_safetensors(&sd, Some(&meta), &other).unwrap();
    let said = ok(&[&"convert", &other, &dir.join("d.pt")]);
    assert!(
        said.contains("note: the __metadata__ of") && said.contains("(format)"),
        "{said}"
    );
}

/// A .pt file of one tensor and `n` integers named `v0`, `v1`, ...
fn tensor_and_ints(path: &Path, n: usize) {
    let mut d = Dict::new();
    d.insert("w", Value::Tensor(Tensor::ones([2]).unwrap()));
    for i in 0..n {
        d.insert(format!("v{i}"), i as i64);
    }
    save(&Value::Dict(d), path).unwrap();
}

#[test]
fn error_messages_list_six_names_and_count_the_rest() {
    let dir = TempDir::new("names");
    let out = dir.join("out.safetensors");
    let six = dir.join("six.pt");
    tensor_and_ints(&six, 6);
    let err = fails(&[&"convert", &six, &out], 1);
    assert!(
        err.contains("v0 (int), v1 (int), v2 (int), v3 (int), v4 (int), v5 (int) are not tensors"),
        "{err}"
    );
    assert!(!err.contains("more"), "{err}");
    let eight = dir.join("eight.pt");
    tensor_and_ints(&eight, 8);
    let err = fails(&[&"convert", &eight, &out], 1);
    assert!(err.contains("v5 (int) and 2 more are not tensors"), "{err}");
    let one = dir.join("one.pt");
    tensor_and_ints(&one, 1);
    let err = fails(&[&"convert", &one, &out], 1);
    assert!(err.contains("v0 (int) is not a tensor"), "{err}");
    // --flatten lists the dropped values the same way.
    let said = ok(&[&"convert", &"--flatten", &eight, &out]);
    assert!(
        said.contains("dropped 8 values that are not tensors: v0, v1, v2, v3, v4, v5 and 2 more"),
        "{said}"
    );
    let said = ok(&[&"convert", &"--flatten", &six, &out]);
    assert!(
        said.contains("dropped 6 values that are not tensors: v0, v1, v2, v3, v4, v5\n"),
        "{said}"
    );
}

#[test]
fn inspect_json_escapes_names_as_json() {
    // Control characters become \u escapes; a space stays a space.
    let dir = TempDir::new("json");
    let path = dir.join("odd.pt");
    let mut d = Dict::new();
    d.insert("a b\u{1}\u{1f}\"\\\t", Value::Tensor(Tensor::ones([1]).unwrap()));
    save(&Value::Dict(d), &path).unwrap();
    let out = ok(&[&"inspect", &"--json", &path]);
    assert!(out.contains(r#""a b\u0001\u001f\"\\\t""#), "{out}");
    let parsed: Json = serde_json::from_str(&out).unwrap();
    assert!(parsed.to_string().contains(r#"a b\u0001\u001f\"\\\t"#), "{parsed}");
}

#[test]
fn bad_input_is_a_message_and_an_exit_status() {
    let dir = TempDir::new("bad");
    let missing = dir.join("missing.pt");
    let err = fails(&[&"inspect", &missing], 1);
    assert!(err.contains("missing.pt") && err.contains("No such file"), "{err}");
    fails(&[&"convert", &missing, &dir.join("x.safetensors")], 1);
    let err = fails(&[&"inspect", &dir.0], 1);
    assert!(err.contains("is a directory"), "{err}");

    let text = dir.join("notes.pt");
    std::fs::write(&text, "these are not tensors\n").unwrap();
    let err = fails(&[&"inspect", &text], 1);
    assert!(
        err.contains("neither a torch.save checkpoint") && err.contains("nor a safetensors file"),
        "{err}"
    );

    let legacy = dir.join("legacy.pt");
    std::fs::write(&legacy, b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19rest").unwrap();
    assert!(fails(&[&"inspect", &legacy], 1).contains("legacy torch.save format"));

    let empty = dir.join("empty.safetensors");
    std::fs::write(&empty, b"").unwrap();
    assert!(fails(&[&"inspect", &empty], 1).contains("0 bytes"));

    for f in ["torch_written/checkpoint.pt", "torch_written/st.safetensors"] {
        let bytes = std::fs::read(data(f)).unwrap();
        let cut = dir.join(f.rsplit('/').next().unwrap());
        for n in [4, 9, bytes.len() / 2, bytes.len() - 1] {
            std::fs::write(&cut, &bytes[..n]).unwrap();
            fails(&[&"inspect", &cut], 1);
            fails(&[&"convert", &cut, &dir.join("out.pt")], 1);
        }
    }
    let err = fails(
        &[
            &"convert",
            &data("linear_state_dict.pt"),
            &dir.join("no/such/dir/x.safetensors"),
        ],
        1,
    );
    assert!(err.contains("No such file"), "{err}");

    // Usage errors: exit status 2.
    assert!(fails(&[&"frobnicate"], 2).contains("unknown command 'frobnicate'"));
    assert!(fails(&[], 2).contains("no command given"));
    assert!(fails(&[&"inspect"], 2).contains("missing FILE"));
    assert!(fails(&[&"inspect", &"a.pt", &"b.pt"], 2).contains("unexpected argument 'b.pt'"));
    assert!(fails(&[&"inspect", &"--jsn", &"a.pt"], 2).contains("unknown option '--jsn'"));
    assert!(fails(&[&"convert", &"a.pt"], 2).contains("missing OUT"));
    assert!(fails(&[&"convert", &"a.pt", &"b.txt"], 2).contains("cannot tell the format"));
    assert!(fails(&[&"convert", &"--to", &"onnx", &"a.pt", &"b.pt"], 2).contains("--to onnx"));
    assert!(fails(&[&"convert", &"a.pt", &"b.pt", &"--key"], 2).contains("--key needs a value"));
    let st = data("linear.safetensors");
    let err = fails(&[&"convert", &"--flatten", &st, &dir.join("x.pt")], 2);
    assert!(err.contains("already flat"), "{err}");
}

#[test]
fn help_and_version() {
    let help = ok(&[&"--help"]);
    assert!(help.contains("ferrotorch inspect [--json] FILE") && help.contains("ferrotorch convert"));
    assert!(ok(&[&"inspect", &"--help"]).starts_with("Usage: ferrotorch inspect"));
    assert!(ok(&[&"convert", &"-h"]).starts_with("Usage: ferrotorch convert"));
    assert_eq!(
        ok(&[&"--version"]),
        format!("ferrotorch {}\n", env!("CARGO_PKG_VERSION"))
    );
}
