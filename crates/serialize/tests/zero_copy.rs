//! Loading from a file borrows its memory map: tensors hold no copy of
//! their bytes (the allocator's count does not grow by the file's size),
//! writing to one copies only into private pages (the file and a second
//! load are unchanged), and what cannot be borrowed (data not aligned for
//! its dtype) is copied, with the same values.

mod common;

use std::collections::HashMap;

use common::assert_tensor_eq;
use ferrotorch_core::backend::TensorExt;
use ferrotorch_core::backend::storage::memory_stats;
use ferrotorch_core::{ALL_DTYPES, DType, Tensor};
use ferrotorch_serialize::{Dict, StateDict, Value, load, load_safetensors, save, save_safetensors};

/// Whether `t`'s storage borrows a file's map.
fn borrows_map(t: &Tensor) -> bool {
    t.storage().read().as_cpu().is_some_and(|b| b.is_external())
}

fn sample(dtype: DType, n: usize) -> Tensor {
    let t = Tensor::arange(n as i64).unwrap();
    match dtype {
        DType::Bool => t.remainder(3).unwrap().eq(0).unwrap(),
        d => t.remainder(100).unwrap().to_dtype(d).unwrap(),
    }
}

#[test]
fn pt_tensors_borrow_the_map_and_share_storages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ckpt.pt");
    let mut d = Dict::new();
    for dt in ALL_DTYPES {
        d.insert(dt.name().to_string(), sample(dt, 1000));
    }
    let base = sample(DType::F32, 64).reshape([8, 8]).unwrap();
    d.insert("base", base.clone());
    d.insert("view", base.narrow(0, 2, 3).unwrap().t().unwrap());
    save(&Value::Dict(d.clone()), &path).unwrap();

    let back = load(&path).unwrap();
    let b = back.as_dict().unwrap();
    for (k, v) in d.iter() {
        let t = b.get(k).and_then(Value::as_tensor).unwrap();
        assert!(borrows_map(t), "{k} was copied");
        assert_tensor_eq(&k.to_string(), t, v.as_tensor().unwrap());
    }
    let (base, view) = (
        b.get_str("base").and_then(Value::as_tensor).unwrap(),
        b.get_str("view").and_then(Value::as_tensor).unwrap(),
    );
    assert!(base.storage().same(view.storage()), "two views of one storage stay one");
}

#[test]
fn writes_stay_in_the_process_and_the_file_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    for st in [false, true] {
        let path = dir.path().join(if st { "w.safetensors" } else { "w.pt" });
        let w = sample(DType::F32, 4096).reshape([64, 64]).unwrap();
        let mut sd = StateDict::new();
        sd.insert("w".to_string(), w.clone());
        if st {
            save_safetensors(&sd, None, &path).unwrap();
        } else {
            save(&Value::Dict([("w", w.clone())].into_iter().collect()), &path).unwrap();
        }
        let file_before = std::fs::read(&path).unwrap();
        let get = || -> Tensor {
            if st {
                load_safetensors(&path).unwrap().tensors.get("w").unwrap().clone()
            } else {
                load(&path)
                    .unwrap()
                    .as_dict()
                    .unwrap()
                    .get_str("w")
                    .and_then(Value::as_tensor)
                    .unwrap()
                    .clone()
            }
        };
        let a = get();
        let b = get();
        assert!(borrows_map(&a) && borrows_map(&b));
        a.add_(1.0).unwrap();
        a.narrow(0, 10, 1).unwrap().zero_().unwrap();
        let mut want = w.add(1.0).unwrap();
        want.narrow(0, 10, 1).unwrap().zero_().unwrap();
        assert_tensor_eq("written", &a, &want);
        assert_tensor_eq("the other load", &b, &w);
        assert_tensor_eq("a third load", &get(), &w);
        assert_eq!(std::fs::read(&path).unwrap(), file_before, "the file changed");
        // The tensor outlives everything the load made.
        want = want.clone();
        drop(b);
        assert_tensor_eq("still readable", &a, &want);
    }
}

#[test]
fn a_large_load_allocates_nothing_like_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.safetensors");
    let mut sd = StateDict::new();
    for i in 0..8 {
        sd.insert(format!("layer{i}"), Tensor::ones([1024, 1024]).unwrap()); // 4 MiB each
    }
    save_safetensors(&sd, None, &path).unwrap();
    drop(sd);
    // Other tests allocate concurrently; the load's own share must be far
    // below the 32 MiB it would copy.
    let before = memory_stats().allocated;
    let st = load_safetensors(&path).unwrap();
    let grown = memory_stats().allocated.saturating_sub(before);
    assert!(grown < 8 << 20, "loading 32 MiB allocated {grown} bytes");
    for (_, t) in st.tensors.iter() {
        assert!(borrows_map(t));
        assert_eq!(t.sum().unwrap().item::<f32>().unwrap(), (1024 * 1024) as f32);
    }
}

#[test]
fn misaligned_data_is_copied_with_the_same_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mis.safetensors");
    // A 1-element bf16 first puts the f32 and f64 data at odd offsets.
    let mut sd = StateDict::new();
    sd.insert("a".to_string(), sample(DType::BF16, 1));
    sd.insert("b".to_string(), sample(DType::F32, 7));
    sd.insert("c".to_string(), sample(DType::F64, 5));
    sd.insert("d".to_string(), sample(DType::U8, 3));
    save_safetensors(&sd, Some(&HashMap::new()), &path).unwrap();
    let st = load_safetensors(&path).unwrap();
    for (k, t) in sd.iter() {
        let got = st.tensors.get(k).unwrap();
        assert_tensor_eq(k, got, t);
        let addr_ok = {
            let g = got.storage().read();
            (g.as_cpu().unwrap().as_ptr() as usize).is_multiple_of(t.element_size())
        };
        assert!(addr_ok, "{k} is misaligned in memory");
    }
}

#[test]
fn a_borrowed_bool_storage_still_refuses_bytes_other_than_0_and_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bool.safetensors");
    let mut sd = StateDict::new();
    sd.insert("m".to_string(), sample(DType::Bool, 64));
    save_safetensors(&sd, None, &path).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] = 2;
    std::fs::write(&path, &bytes).unwrap();
    let err = load_safetensors(&path).unwrap_err().to_string();
    assert!(err.contains("0 or 1"), "{err}");
}
