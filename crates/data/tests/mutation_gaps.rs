//! Behaviours no other test pinned down (found by mutation testing):
//! sampler and dataset lengths through `Arc` and `&`, unbatched items,
//! the workers' round robin over 3 workers and past a finished stream,
//! the prefetch limit, timeouts that are not hit, stopping mid-batch,
//! persistent workers after a worker died, per-channel `Normalize`, and
//! IDX files at the edges of their header. PyTorch's values come from
//! `gen_mutation_gaps.py` (PyTorch 2.15), in `tests/data/mutation_gaps.json`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ferrotorch_core::Tensor;
use ferrotorch_data::datasets::MNIST;
use ferrotorch_data::transforms::{Compose, Normalize, ToTensor, Transform};
use ferrotorch_data::{
    BatchSampler, CollateFn, ConcatDataset, DataLoader, Dataset, DefaultCollate, ItemIter, IterableDataset,
    RandomSampler, Result, Sampler, SubsetRandomSampler, TensorDataset, WeightedRandomSampler, get_worker_info,
    random_split_fractions,
};
use serde_json::Value;

/// The longest any worker wait may take in these tests: a hang is an
/// error, not a stuck test.
const LIMIT: Duration = Duration::from_secs(10);

fn reference() -> Value {
    let path = format!("{}/tests/data/mutation_gaps.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn u(v: &Value) -> usize {
    v.as_u64().unwrap() as usize
}

fn i64s(v: &Value) -> Vec<i64> {
    v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect()
}

fn nested(v: &Value) -> Vec<Vec<i64>> {
    v.as_array().unwrap().iter().map(i64s).collect()
}

fn batches(loader: &DataLoader<i64>) -> Vec<Vec<i64>> {
    loader
        .iter()
        .unwrap()
        .map(|b| b.unwrap().to_vec::<i64>().unwrap())
        .collect()
}

#[test]
fn sampler_lengths_and_attributes() {
    let r = reference();
    let want = &r["sampler_lens"];
    let rs = RandomSampler::with_options(10, true, Some(25), None).unwrap();
    assert_eq!(
        (rs.num_samples(), rs.len()),
        (u(&want["random_num_samples"]), u(&want["random_len"]))
    );
    // Through an `Arc`, as a loader's sampler may be shared.
    let srs = Arc::new(SubsetRandomSampler::new(vec![5, 9, 2], None));
    assert_eq!(srs.len(), u(&want["subset_random_len"]));
    let wrs = WeightedRandomSampler::new(&[0.1, 0.9, 0.4], 7, true, None).unwrap();
    assert_eq!(wrs.len(), u(&want["weighted_len"]));
    // A batch sampler over a borrowed sampler.
    let ten = SubsetRandomSampler::new((0..10).collect::<Vec<_>>(), None);
    let b = BatchSampler::new(&ten, 4, false).unwrap();
    assert_eq!(
        (b.len(), b.batch_size()),
        (u(&want["batch_len"]), u(&want["batch_size"]))
    );
    assert_eq!(
        BatchSampler::new(&ten, 4, true).unwrap().len(),
        u(&want["batch_drop_last_len"])
    );
    assert_eq!(b.sampler().len(), 10);
}

#[test]
fn datasets_through_references() {
    let r = reference();
    let want = &r["concat"];
    let a = TensorDataset::new(Tensor::arange(3).unwrap()).unwrap();
    let b = TensorDataset::new(Tensor::arange_step(10, 15, 1).unwrap()).unwrap();
    // `ConcatDataset([a, b])` over borrowed parts.
    let c = ConcatDataset::new(vec![&a, &b]).unwrap();
    let sizes: Vec<i64> = c.cumulative_sizes().iter().map(|&s| s as i64).collect();
    assert_eq!(sizes, i64s(&want["cumulative_sizes"]));
    assert_eq!(c.len(), u(&want["len"]));
    let items: Vec<i64> = (0..c.len()).map(|i| c.get(i).unwrap().item::<i64>().unwrap()).collect();
    assert_eq!(items, i64s(&want["items"]));
    assert_eq!(Dataset::len(&&b), 5);
}

#[test]
fn unbatched_items_stay_as_they_are() {
    // `DataLoader(TensorDataset(x, y), batch_size=None)`: each item as the
    // dataset gives it.
    let r = reference();
    let want = r["unbatched_tensor_dataset"].as_array().unwrap().clone();
    let xs = Tensor::arange(6).unwrap().reshape((3, 2)).unwrap();
    let ys = Tensor::new([10i64, 11, 12]).unwrap();
    let loader = DataLoader::builder(TensorDataset::new(vec![xs, ys]).unwrap())
        .batch_size(None)
        .build()
        .unwrap();
    let got: Vec<Vec<Tensor>> = loader.iter().unwrap().map(|b| b.unwrap()).collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].to_vec::<i64>().unwrap(), i64s(&w[0]));
        assert_eq!(g[1].dim(), 0);
        assert_eq!(g[1].item::<i64>().unwrap(), w[1].as_i64().unwrap());
    }
    // A string item is kept, as the one-string list its batch type is.
    let s: Vec<String> = CollateFn::<String>::convert(&DefaultCollate, "seven".to_string()).unwrap();
    assert_eq!(s, ["seven"]);
}

#[test]
fn fractions_that_do_not_add_up_to_one_are_an_error() {
    // PyTorch: "Sum of input lengths does not equal the length of the
    // input dataset!" for [0.3, 0.3].
    let r = reference();
    assert!(r["split_03_03"].as_str().unwrap().contains("Sum of input lengths"));
    let ds = TensorDataset::new(Tensor::arange(3).unwrap()).unwrap();
    assert!(random_split_fractions(&ds, &[0.3, 0.3], None).is_err());
    assert!(random_split_fractions(&ds, &[0.2], None).is_err());
}

/// `shard[id]` items per worker, `100 * id + i`; on the main thread,
/// worker 0's.
struct Uneven(Vec<usize>);

impl IterableDataset for Uneven {
    type Item = i64;
    fn iter(&self) -> ItemIter<'_, i64> {
        let id = get_worker_info().map_or(0, |w| w.id);
        Box::new((0..self.0[id]).map(move |i| Ok((100 * id + i) as i64)))
    }
}

#[test]
fn a_finished_stream_leaves_the_round_robin() {
    // Worker 1's stream ends first; from then on batches alternate between
    // workers 0 and 2, as PyTorch's.
    let r = reference();
    let shard: Vec<usize> = r["shard"].as_array().unwrap().iter().map(u).collect();
    for pf in [1, 2] {
        let loader = DataLoader::iterable(Uneven(shard.clone()))
            .batch_size(2)
            .num_workers(3)
            .prefetch_factor(pf)
            .timeout(LIMIT)
            .build()
            .unwrap();
        assert_eq!(
            batches(&loader),
            nested(&r["uneven_stream"][pf.to_string()]),
            "prefetch {pf}"
        );
    }
}

/// Item `i` is the id of the worker loading it.
struct WorkerId;

impl Dataset for WorkerId {
    type Item = i64;
    fn len(&self) -> usize {
        20
    }
    fn get(&self, _: usize) -> Result<i64> {
        Ok(get_worker_info().map_or(-1, |w| w.id as i64))
    }
}

#[test]
fn three_workers_take_batches_in_turn() {
    let r = reference();
    let want = nested(&r["worker_of_batch"]);
    for persistent in [false, true] {
        let loader = DataLoader::builder(WorkerId)
            .batch_size(2)
            .num_workers(3)
            .persistent_workers(persistent)
            .timeout(LIMIT)
            .build()
            .unwrap();
        for epoch in 0..2 {
            assert_eq!(batches(&loader), want, "persistent {persistent}, epoch {epoch}");
        }
    }
}

/// Item `i` is `i`; counts the calls; sleeps `ms` in each.
#[derive(Clone)]
struct Counted {
    n: usize,
    ms: u64,
    calls: Arc<AtomicUsize>,
}

impl Counted {
    fn new(n: usize, ms: u64) -> Self {
        Counted {
            n,
            ms,
            calls: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl Dataset for Counted {
    type Item = i64;
    fn len(&self) -> usize {
        self.n
    }
    fn get(&self, index: usize) -> Result<i64> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(self.ms));
        Ok(index as i64)
    }
}

/// The count once it reached `at_least` (or 5 s passed) and then did not
/// move for 300 ms.
fn settled(calls: &AtomicUsize, at_least: usize) -> usize {
    let start = Instant::now();
    while calls.load(Ordering::SeqCst) < at_least && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut last = calls.load(Ordering::SeqCst);
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = calls.load(Ordering::SeqCst);
        if now == last || start.elapsed() > Duration::from_secs(8) {
            return now;
        }
        last = now;
    }
}

#[test]
fn an_epoch_starts_with_prefetch_factor_batches_per_worker() {
    // PyTorch's `_reset` puts `prefetch_factor * num_workers` batches'
    // indices before the first batch is asked for, and no more.
    let ds = Counted::new(200, 0);
    let calls = ds.calls.clone();
    let loader = DataLoader::builder(ds)
        .batch_size(2)
        .num_workers(2)
        .prefetch_factor(3)
        .timeout(LIMIT)
        .build()
        .unwrap();
    let mut it = loader.iter().unwrap();
    assert_eq!(settled(&calls, 3 * 2 * 2), 3 * 2 * 2);
    assert_eq!(it.next().unwrap().unwrap().to_vec::<i64>().unwrap(), [0, 1]);
    drop(it);
}

/// Item `i` is two draws of `rand` from the loading worker's generator
/// and that worker's seed.
struct Draws;

impl Dataset for Draws {
    type Item = (Tensor, i64);
    fn len(&self) -> usize {
        4
    }
    fn get(&self, _: usize) -> Result<(Tensor, i64)> {
        let w = get_worker_info().expect("loaded on a worker");
        let x = ferrotorch_core::TensorOptions::new().generator(w.generator()).rand(2)?;
        Ok((x, w.seed as i64))
    }
}

#[test]
fn a_workers_generator_is_seeded_with_its_seed() {
    // As `torch.manual_seed(base_seed + id)` in each PyTorch worker: the
    // worker's draws are those of a generator seeded with its seed, one
    // after another over the items it loads.
    let loader = DataLoader::builder(Draws)
        .batch_size(1)
        .num_workers(2)
        .generator(ferrotorch_core::Generator::new(11))
        .timeout(LIMIT)
        .build()
        .unwrap();
    let got: Vec<(Vec<f32>, i64)> = loader
        .iter()
        .unwrap()
        .map(|b| {
            let (x, s) = b.unwrap();
            (x.to_vec::<f32>().unwrap(), s.item::<i64>().unwrap())
        })
        .collect();
    assert_eq!(got.len(), 4);
    for w in 0..2 {
        // Batches w and w + 2 come from worker w.
        let seed = got[w].1;
        assert_eq!(got[w + 2].1, seed);
        let g = ferrotorch_core::Generator::new(seed as u64);
        let draw = || {
            ferrotorch_core::TensorOptions::new()
                .generator(&g)
                .rand(2)
                .unwrap()
                .to_vec::<f32>()
                .unwrap()
        };
        assert_eq!(got[w].0, draw(), "worker {w}, first item");
        assert_eq!(got[w + 2].0, draw(), "worker {w}, second item");
    }
}

#[test]
fn a_timeout_longer_than_each_batch_is_no_error() {
    // Each batch takes 120 ms, more than the loader's 50 ms poll but well
    // under the timeout.
    let loader = DataLoader::builder(Counted::new(3, 120))
        .batch_size(1)
        .num_workers(1)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    assert_eq!(batches(&loader), [vec![0], vec![1], vec![2]]);
}

#[test]
fn dropping_the_iterator_stops_a_worker_mid_batch() {
    // A batch takes 50 items x 40 ms; dropped right after the start, each
    // worker finishes the item it is on and stops, not the whole batch.
    let ds = Counted::new(100, 40);
    let calls = ds.calls.clone();
    let loader = DataLoader::builder(ds)
        .batch_size(50)
        .num_workers(2)
        .timeout(LIMIT)
        .build()
        .unwrap();
    let it = loader.iter().unwrap();
    std::thread::sleep(Duration::from_millis(30));
    drop(it);
    let after = calls.load(Ordering::SeqCst);
    assert!(after < 50, "{after} items loaded after dropping the iterator");
    // The drop joined the workers: nothing loads after it.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        after,
        "workers still loading after the drop"
    );
}

#[test]
fn normalize_per_channel() {
    let r = reference();
    let n = &r["normalize"];
    let f = |v: &Value| -> Vec<f64> { v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect() };
    let x: Vec<f32> = f(&n["x"]).into_iter().map(|v| v as f32).collect();
    let x = Tensor::from_vec(x, (3, 2, 2)).unwrap();
    let y = Normalize::new(f(&n["mean"]), f(&n["std"])).apply(&x).unwrap();
    assert_eq!(y.shape(), [3, 2, 2]);
    let want: Vec<f32> = f(&n["y"]).into_iter().map(|v| v as f32).collect();
    assert_eq!(y.to_vec::<f32>().unwrap(), want);
    // The transforms of a `Compose`, counted in its `Debug`.
    let c = Compose::new().then(ToTensor).then(Normalize::new([0.5], [0.5]));
    assert_eq!(format!("{c:?}"), "Compose(2 transforms)");
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ferrotorch-mutation-gaps-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn idx(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut v = magic.to_be_bytes().to_vec();
    for d in dims {
        v.extend(d.to_be_bytes());
    }
    v.extend(data);
    v
}

#[test]
fn idx_files_at_the_edges_of_their_header() {
    // Only the header, no items: an empty split.
    let d = temp_dir("empty");
    std::fs::write(d.join("train-images-idx3-ubyte"), idx(0x803, &[0, 28, 28], &[])).unwrap();
    std::fs::write(d.join("train-labels-idx1-ubyte"), idx(0x801, &[0], &[])).unwrap();
    let ds = MNIST::new(&d, true).unwrap();
    assert_eq!((ds.len(), ds.images().shape()), (0, &[0usize, 28, 28][..]));
    assert_eq!(format!("{ds:?}"), "MNIST(images=[0, 28, 28], transform=none)");
    assert_eq!(
        format!("{:?}", ds.with_transform(ToTensor)),
        "MNIST(images=[0, 28, 28], transform=set)"
    );
    // The magic number alone: short of the header, not of the magic.
    std::fs::write(d.join("train-images-idx3-ubyte"), 0x803u32.to_be_bytes()).unwrap();
    let e = MNIST::new(&d, true).unwrap_err().to_string();
    assert!(e.contains("shorter than the 16-byte IDX header"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}
