//! Shared helpers of the serialize tests: where the checkpoint files are
//! and the oracle's JSON tensor format.

#![allow(dead_code)]

use std::path::PathBuf;

use ferrotorch_core::{DType, Tensor};

/// The folder with PyTorch's checkpoint files: `$ORACLE_DIR/checkpoints`
/// when `ORACLE_DIR` is set (the shared oracle), else the copies in
/// `tests/data`.
pub fn data_dir() -> PathBuf {
    match std::env::var_os("ORACLE_DIR") {
        Some(d) => PathBuf::from(d).join("checkpoints"),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data"),
    }
}

/// The bytes of one checkpoint file.
pub fn read(name: &str) -> Vec<u8> {
    let p = data_dir().join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The bytes of a file of this crate's `tests/data` (never the oracle's).
pub fn read_local(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `checkpoints.json`.
pub fn oracle_json() -> serde_json::Value {
    serde_json::from_slice(&read("checkpoints.json")).unwrap()
}

/// A tensor in the oracle's JSON format (`shape`, `dtype`, `data`).
pub fn json_tensor(v: &serde_json::Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let data: Vec<f64> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let dtype = DType::from_name(v["dtype"].as_str().unwrap()).unwrap();
    Tensor::from_vec(data, shape).unwrap().to_dtype(dtype).unwrap()
}

/// Asserts `got` has `want`'s dtype, shape and exact elements.
pub fn assert_tensor_eq(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.to_vec::<f64>().unwrap(), want.to_vec::<f64>().unwrap());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
            "{what}[{i}]: {a} vs {b}"
        );
    }
}

/// A torch.save-like zip archive with `pkl` as `archive/data.pkl` and the
/// given storage entries (`archive/data/<key>`).
pub fn pt(pkl: &[u8], entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    z.start_file("archive/data.pkl", opts).unwrap();
    std::io::Write::write_all(&mut z, pkl).unwrap();
    for (k, b) in entries {
        z.start_file(format!("archive/data/{k}"), opts).unwrap();
        std::io::Write::write_all(&mut z, b).unwrap();
    }
    z.finish().unwrap().into_inner()
}
