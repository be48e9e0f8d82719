//! DataLoader behaviour: options and their errors, batching, collation,
//! worker threads (order, errors, panics, shutdown, persistence, timeouts,
//! seeding) and streams.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferrotorch_core::{DType, Generator, Tensor, manual_seed};
use ferrotorch_data::{
    BatchSampler, CollateFn, ConcatDataset, DataError, DataLoader, Dataset, DefaultCollate, ItemIter, IterableDataset,
    Result, Sampler, SequentialSampler, Subset, TensorDataset, WeightedRandomSampler, get_worker_info,
};

/// The tests that seed the global generator run one at a time.
static GLOBAL: Mutex<()> = Mutex::new(());

/// Item `i` is `i`; misbehaves at chosen indices; counts calls.
#[derive(Clone, Default)]
struct Numbers {
    n: usize,
    fail_at: Option<usize>,
    panic_at: Option<usize>,
    /// Sleep (ms) per item: `slow(i)`.
    slow: Option<fn(usize) -> u64>,
    calls: Arc<AtomicUsize>,
    threads: Arc<Mutex<Vec<String>>>,
}

impl Numbers {
    fn new(n: usize) -> Self {
        Numbers {
            n,
            ..Default::default()
        }
    }
}

impl Dataset for Numbers {
    type Item = i64;
    fn len(&self) -> usize {
        self.n
    }
    fn get(&self, index: usize) -> Result<i64> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(name) = std::thread::current().name() {
            self.threads.lock().unwrap().push(name.to_string());
        }
        if let Some(f) = self.slow {
            std::thread::sleep(Duration::from_millis(f(index)));
        }
        if self.fail_at == Some(index) {
            return Err(DataError::msg(format!("cannot read item {index}")));
        }
        if self.panic_at == Some(index) {
            panic!("item {index} is cursed");
        }
        Ok(index as i64)
    }
}

fn collect_i64(loader: &DataLoader<i64>) -> Vec<Vec<i64>> {
    loader
        .iter()
        .unwrap()
        .map(|b| b.unwrap().to_vec::<i64>().unwrap())
        .collect()
}

#[test]
fn sequential_batches_and_len() {
    for workers in [0, 1, 3] {
        let loader = DataLoader::builder(Numbers::new(10))
            .batch_size(3)
            .num_workers(workers)
            .build()
            .unwrap();
        assert_eq!(loader.len().unwrap(), 4);
        assert_eq!((loader.batch_size(), loader.drop_last()), (Some(3), false));
        assert_eq!(loader.num_workers(), workers);
        assert_eq!(
            collect_i64(&loader),
            [vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8], vec![9]]
        );
        let loader = DataLoader::builder(Numbers::new(10))
            .batch_size(3)
            .drop_last(true)
            .num_workers(workers)
            .build()
            .unwrap();
        assert_eq!(loader.len().unwrap(), 3);
        assert!(loader.drop_last());
        assert_eq!(collect_i64(&loader).len(), 3);
    }
    // The default batch size is 1, as PyTorch's.
    let loader = DataLoader::builder(Numbers::new(3)).build().unwrap();
    assert_eq!(collect_i64(&loader), [vec![0], vec![1], vec![2]]);
    // `for batch in &loader`.
    let mut n = 0;
    for batch in &loader {
        assert_eq!(batch.unwrap().shape(), [1]);
        n += 1;
    }
    assert_eq!(n, 3);
}

#[test]
fn unbatched_items() {
    for workers in [0, 2] {
        let loader = DataLoader::builder(Numbers::new(4))
            .batch_size(None)
            .num_workers(workers)
            .build()
            .unwrap();
        assert_eq!(loader.len().unwrap(), 4);
        let items: Vec<Tensor> = loader.iter().unwrap().map(|b| b.unwrap()).collect();
        assert!(items.iter().all(|t| t.dim() == 0 && t.dtype() == DType::I64));
        assert_eq!(items[3].item::<i64>().unwrap(), 3);
    }
}

#[test]
fn option_errors() {
    let msg = |r: Result<DataLoader<i64>>| match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    };
    let b = || DataLoader::builder(Numbers::new(4));
    assert!(msg(b().batch_size(0).build()).contains("batch_size should be a positive integer value"));
    assert!(
        msg(b().shuffle(true).sampler(SequentialSampler::new(4)).build()).contains("mutually exclusive with shuffle")
    );
    let bs = || BatchSampler::new(SequentialSampler::new(4), 2, false).unwrap();
    assert!(msg(b().batch_size(2).batch_sampler(bs()).build()).contains("batch_sampler option is mutually exclusive"));
    assert!(
        msg(b().drop_last(true).batch_sampler(bs()).build()).contains("batch_sampler option is mutually exclusive")
    );
    assert!(msg(b().batch_size(None).drop_last(true).build()).contains("disables auto-batching"));
    assert!(msg(b().prefetch_factor(2).build()).contains("prefetch_factor option could only be specified"));
    assert!(msg(b().persistent_workers(true).build()).contains("persistent_workers option needs num_workers > 0"));
    assert!(msg(b().num_workers(1).prefetch_factor(0).build()).contains("prefetch_factor"));
    assert!(msg(DataLoader::builder(Numbers::new(0)).shuffle(true).build()).contains("num_samples=0"));
    let s = || DataLoader::iterable(Stream { n: 3, shard: false });
    assert!(s().shuffle(true).build().is_err());
    assert!(s().sampler(SequentialSampler::new(3)).build().is_err());
    // A batch sampler alone is fine, batch_size(1) with it too.
    let loader = b().batch_size(1).batch_sampler(bs()).build().unwrap();
    assert_eq!(loader.len().unwrap(), 2);
    assert_eq!(collect_i64(&loader), [vec![0, 1], vec![2, 3]]);
}

#[test]
fn batches_arrive_in_order_whoever_finishes_first() {
    // Early items are slow, so later batches finish first.
    let mut ds = Numbers::new(24);
    ds.slow = Some(|i| if i < 8 { 30 } else { 0 });
    for workers in [2, 4] {
        let loader = DataLoader::builder(ds.clone())
            .batch_size(2)
            .num_workers(workers)
            .prefetch_factor(3)
            .build()
            .unwrap();
        let got: Vec<i64> = collect_i64(&loader).concat();
        assert_eq!(got, (0..24).collect::<Vec<_>>());
    }
}

#[test]
fn same_bits_with_and_without_workers() {
    let _g = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    manual_seed(3);
    let x = Tensor::randn((50, 4)).unwrap();
    let y = Tensor::randint(0, 10, [50]).unwrap();
    let run = |workers: usize, persistent: bool| {
        let loader = DataLoader::builder(TensorDataset::new((x.clone(), y.clone())).unwrap())
            .batch_size(8)
            .shuffle(true)
            .generator(Generator::new(11))
            .num_workers(workers)
            .persistent_workers(persistent)
            .build()
            .unwrap();
        let mut out = Vec::new();
        for _ in 0..2 {
            for b in loader.iter().unwrap() {
                let (xb, yb) = b.unwrap();
                out.push((xb.to_vec::<f32>().unwrap(), yb.to_vec::<i64>().unwrap()));
            }
        }
        out
    };
    let base = run(0, false);
    assert_eq!(base.len(), 14);
    let bits = |v: &Vec<(Vec<f32>, Vec<i64>)>| -> Vec<(Vec<u32>, Vec<i64>)> {
        v.iter()
            .map(|(a, b)| (a.iter().map(|f| f.to_bits()).collect(), b.clone()))
            .collect()
    };
    assert_eq!(bits(&run(2, false)), bits(&base));
    assert_eq!(bits(&run(0, false)), bits(&base));
    // Persistent workers draw no new base seed in epoch 2 (as PyTorch), but
    // the shuffle comes from the loader's generator either way.
    assert_eq!(run(2, true).len(), 14);
}

fn expect_item_error(r: Option<Result<Tensor>>, index: usize) {
    match r {
        Some(Err(DataError::Item { index: i, source })) => {
            assert_eq!(i, index);
            assert!(source.to_string().contains(&format!("cannot read item {index}")));
        }
        Some(Err(e)) => panic!("wrong error {e}"),
        Some(Ok(_)) => panic!("expected an error"),
        None => panic!("ended early"),
    }
}

#[test]
fn item_errors_name_the_index_and_the_epoch_goes_on() {
    let mut ds = Numbers::new(10);
    ds.fail_at = Some(7);
    for workers in [0, 2] {
        let loader = DataLoader::builder(ds.clone())
            .batch_size(3)
            .num_workers(workers)
            .build()
            .unwrap();
        let mut it = loader.iter().unwrap();
        assert_eq!(it.next().unwrap().unwrap().to_vec::<i64>().unwrap(), [0, 1, 2]);
        assert_eq!(it.next().unwrap().unwrap().to_vec::<i64>().unwrap(), [3, 4, 5]);
        expect_item_error(it.next(), 7);
        assert_eq!(it.next().unwrap().unwrap().to_vec::<i64>().unwrap(), [9]);
        assert!(it.next().is_none());
        let e = DataError::Item {
            index: 7,
            source: Box::new(DataError::msg("x")),
        };
        assert_eq!(e.to_string(), "loading item 7 of the dataset: x");
    }
}

#[test]
fn a_panicking_worker_is_an_error_naming_it() {
    let mut ds = Numbers::new(12);
    ds.panic_at = Some(7); // batch 2 (of 3 items), so worker 2 % 2 = 0
    let loader = DataLoader::builder(ds.clone())
        .batch_size(3)
        .num_workers(2)
        .build()
        .unwrap();
    for _ in 0..2 {
        let got: Vec<Result<Tensor>> = loader.iter().unwrap().collect();
        assert_eq!(got.len(), 4);
        match &got[2] {
            Err(DataError::WorkerPanicked { worker, message }) => {
                assert_eq!(*worker, 0);
                assert!(message.contains("item 7 is cursed"), "{message}");
            }
            other => panic!(
                "expected a panic error, got {:?}",
                other.as_ref().map(|t| t.shape().to_vec())
            ),
        }
        assert!(got[2].as_ref().unwrap_err().to_string().contains("worker 0 panicked"));
        assert_eq!(got[3].as_ref().unwrap().to_vec::<i64>().unwrap(), [9, 10, 11]);
    }
}

#[test]
fn dropping_the_iterator_mid_epoch_stops_the_workers() {
    let mut ds = Numbers::new(400);
    ds.slow = Some(|_| 5);
    let calls = ds.calls.clone();
    let loader = DataLoader::builder(ds).batch_size(4).num_workers(2).build().unwrap();
    let mut it = loader.iter().unwrap();
    it.next().unwrap().unwrap();
    let t = Instant::now();
    drop(it);
    assert!(t.elapsed() < Duration::from_secs(2), "drop took {:?}", t.elapsed());
    let after = calls.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        after,
        "workers still loading after the drop"
    );
    // At most the prefetched batches were loaded, not the epoch.
    assert!(after <= 4 * (1 + 2 * 2), "{after} items loaded");
    // The loader starts a fresh epoch after that.
    assert_eq!(loader.iter().unwrap().count(), 100);
}

#[test]
fn persistent_workers_survive_epochs_and_abandoned_ones() {
    let ds = Numbers::new(20);
    let threads = ds.threads.clone();
    let loader = DataLoader::builder(ds)
        .batch_size(2)
        .num_workers(2)
        .persistent_workers(true)
        .build()
        .unwrap();
    let want: Vec<Vec<i64>> = (0..10).map(|b| vec![2 * b, 2 * b + 1]).collect();
    assert_eq!(collect_i64(&loader), want);
    // Abandon an epoch after one batch: its queued work must not leak
    // into the next one.
    let mut it = loader.iter().unwrap();
    it.next().unwrap().unwrap();
    drop(it);
    assert_eq!(collect_i64(&loader), want);
    let names: std::collections::BTreeSet<String> = threads.lock().unwrap().iter().cloned().collect();
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["ferrotorch-data-worker-0", "ferrotorch-data-worker-1"]
    );
}

#[test]
fn timeout_is_an_error() {
    let mut ds = Numbers::new(4);
    ds.slow = Some(|_| 400);
    let loader = DataLoader::builder(ds)
        .batch_size(2)
        .num_workers(1)
        .timeout(Duration::from_millis(60))
        .build()
        .unwrap();
    let mut it = loader.iter().unwrap();
    let e = it.next().unwrap().unwrap_err();
    assert!(matches!(e, DataError::Worker { worker: 0, .. }), "{e}");
    assert!(e.to_string().contains("timed out"), "{e}");
    assert!(it.next().is_none());
}

/// A panic payload whose own drop panics: the worker that catches it dies
/// outside the task's `catch_unwind`, without a reply.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("the panic payload's drop panics");
    }
}

/// Item `i` is `i`, but item 0 panics with a [`Bomb`].
struct KillsItsWorker;

impl Dataset for KillsItsWorker {
    type Item = i64;
    fn len(&self) -> usize {
        4
    }
    fn get(&self, index: usize) -> Result<i64> {
        if index == 0 {
            std::panic::panic_any(Bomb);
        }
        Ok(index as i64)
    }
}

/// With persistent workers, the epoch after a worker thread died goes on
/// with the living ones; the dead worker's batches are errors in place.
#[test]
fn persistent_workers_go_on_without_a_dead_one() {
    let loader = DataLoader::builder(KillsItsWorker)
        .batch_size(1)
        .num_workers(2)
        .persistent_workers(true)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    // Worker 0 dies on batch 0: that epoch ends with the error.
    let first: Vec<Result<Tensor>> = loader.iter().unwrap().collect();
    assert_eq!(first.len(), 1);
    assert!(matches!(first[0], Err(DataError::Worker { worker: 0, .. })));
    // The next epoch still has worker 1: its batches (1 and 3) arrive, and
    // the batches of the dead worker are errors in their place.
    let second: Vec<Result<Tensor>> = loader.iter().unwrap().collect();
    assert_eq!(second.len(), 4);
    for (k, r) in second.iter().enumerate() {
        match r {
            Ok(t) => {
                assert_eq!(k % 2, 1);
                assert_eq!(t.to_vec::<i64>().unwrap(), [k as i64]);
            }
            Err(DataError::Worker { worker: 0, detail }) => {
                assert_eq!(k % 2, 0);
                assert_eq!(detail, "the thread has stopped");
            }
            Err(e) => panic!("batch {k}: {e}"),
        }
    }
}

#[test]
fn a_worker_thread_that_dies_is_an_error_not_a_hang() {
    // Worker 0 (batch 0) dies; worker 1 lives on, so the result channel
    // stays open: the loader notices the dead thread at its next poll
    // (every 50 ms), long before the 5 s timeout.
    let loader = DataLoader::builder(KillsItsWorker)
        .batch_size(1)
        .num_workers(2)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let t = Instant::now();
    let mut it = loader.iter().unwrap();
    let e = it.next().unwrap().unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(4), "took {:?}", t.elapsed());
    match &e {
        DataError::Worker { worker: 0, detail } => {
            assert_eq!(detail, "the thread stopped without delivering its batch")
        }
        other => panic!("expected worker 0 to have stopped, got {other}"),
    }
    assert_eq!(
        e.to_string(),
        "DataLoader worker 0: the thread stopped without delivering its batch"
    );
    // The epoch ends there.
    assert!(it.next().is_none());
}

#[test]
fn sampler_errors_reach_the_loop() {
    // 5 distinct draws from 3 weights without replacement: PyTorch's error,
    // when the epoch starts.
    let s = WeightedRandomSampler::new(&[1.0, 2.0, 3.0], 5, false, None).unwrap();
    for workers in [0, 2] {
        let loader = DataLoader::builder(Numbers::new(3))
            .sampler(s.clone())
            .batch_size(2)
            .num_workers(workers)
            .build()
            .unwrap();
        let got: Vec<Result<Tensor>> = loader.iter().unwrap().collect();
        assert_eq!(got.len(), 1);
        assert!(got[0].is_err());
    }
}

/// A dataset drawing random numbers: from the worker's generator on a
/// worker, from the global one otherwise.
struct Noisy;

impl Dataset for Noisy {
    type Item = (Tensor, i64);
    fn len(&self) -> usize {
        16
    }
    fn get(&self, index: usize) -> Result<(Tensor, i64)> {
        let opts = ferrotorch_core::TensorOptions::new();
        let x = match get_worker_info() {
            Some(w) => opts.generator(w.generator()).rand(2)?,
            None => opts.rand(2)?,
        };
        let seed = get_worker_info().map_or(-1, |w| w.seed as i64);
        let _ = index;
        Ok((x, seed))
    }
}

#[test]
fn worker_seeds_make_random_datasets_reproducible() {
    let run = |seed: u64| {
        let loader = DataLoader::builder(Noisy)
            .batch_size(4)
            .num_workers(2)
            .generator(Generator::new(seed))
            .build()
            .unwrap();
        loader
            .iter()
            .unwrap()
            .map(|b| {
                let (x, s) = b.unwrap();
                (x.to_vec::<f32>().unwrap(), s.to_vec::<i64>().unwrap())
            })
            .collect::<Vec<_>>()
    };
    let a = run(5);
    assert_eq!(a, run(5));
    assert_ne!(a, run(6));
    // Worker k (batches k, k + 2, ...) has seed base_seed + k; base_seed
    // is the loader generator's first int64 draw.
    let base = Tensor::zeros_dtype((), DType::I64)
        .unwrap()
        .random_with_(&Generator::new(5))
        .unwrap()
        .item::<i64>()
        .unwrap();
    for (b, (_, seeds)) in a.iter().enumerate() {
        assert!(seeds.iter().all(|&s| s == base + (b % 2) as i64));
    }
}

/// `0..n` as a stream; with `shard`, each worker takes every
/// `num_workers`-th item from its id.
struct Stream {
    n: usize,
    shard: bool,
}

impl IterableDataset for Stream {
    type Item = i64;
    fn iter(&self) -> ItemIter<'_, i64> {
        let (id, k) = match get_worker_info() {
            Some(w) if self.shard => (w.id, w.num_workers),
            _ => (0, 1),
        };
        Box::new((0..self.n).skip(id).step_by(k).map(|i| Ok(i as i64)))
    }
    fn len_hint(&self) -> Option<usize> {
        Some(self.n)
    }
}

#[test]
fn streams_batched_with_and_without_workers() {
    let loader = DataLoader::iterable(Stream { n: 7, shard: false })
        .batch_size(3)
        .build()
        .unwrap();
    assert_eq!(loader.len().unwrap(), 3);
    assert_eq!(collect_i64(&loader), [vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
    let loader = DataLoader::iterable(Stream { n: 7, shard: false })
        .batch_size(3)
        .drop_last(true)
        .build()
        .unwrap();
    assert_eq!(loader.len().unwrap(), 2);
    assert_eq!(collect_i64(&loader), [vec![0, 1, 2], vec![3, 4, 5]]);

    // Sharded over 2 workers: worker 0 streams 0 2 4 6 8 10, worker 1
    // 1 3 5 7 9; batches alternate between them, as PyTorch's.
    let loader = DataLoader::iterable(Stream { n: 11, shard: true })
        .batch_size(2)
        .num_workers(2)
        .build()
        .unwrap();
    for _ in 0..2 {
        assert_eq!(
            collect_i64(&loader),
            [vec![0, 2], vec![1, 3], vec![4, 6], vec![5, 7], vec![8, 10], vec![9]]
        );
    }
    // Not sharded: every worker yields the whole stream.
    let loader = DataLoader::iterable(Stream { n: 3, shard: false })
        .batch_size(2)
        .num_workers(2)
        .persistent_workers(true)
        .build()
        .unwrap();
    for _ in 0..2 {
        assert_eq!(collect_i64(&loader), [vec![0, 1], vec![0, 1], vec![2], vec![2]]);
    }
    // Unbatched.
    let loader = DataLoader::iterable(Stream { n: 3, shard: false })
        .batch_size(None)
        .build()
        .unwrap();
    let items: Vec<i64> = loader
        .iter()
        .unwrap()
        .map(|t| t.unwrap().item::<i64>().unwrap())
        .collect();
    assert_eq!(items, [0, 1, 2]);
}

/// A stream that does not know its length (no `len_hint`).
struct Unsized;

impl IterableDataset for Unsized {
    type Item = i64;
    fn iter(&self) -> ItemIter<'_, i64> {
        Box::new((0..5).map(Ok))
    }
}

#[test]
fn len_and_is_empty_of_maps_and_streams() {
    let empty = DataLoader::builder(Numbers::new(0)).batch_size(3).build().unwrap();
    assert_eq!((empty.len().unwrap(), empty.is_empty().unwrap()), (0, true));
    assert!(collect_i64(&empty).is_empty());
    let short = DataLoader::builder(Numbers::new(2))
        .batch_size(3)
        .drop_last(true)
        .build()
        .unwrap();
    assert_eq!((short.len().unwrap(), short.is_empty().unwrap()), (0, true));
    let one = DataLoader::builder(Numbers::new(2)).batch_size(3).build().unwrap();
    assert_eq!((one.len().unwrap(), one.is_empty().unwrap()), (1, false));
    // A stream without a length: `len(loader)` is an error (PyTorch's
    // TypeError), and so is asking whether it is empty; iterating works.
    let stream = DataLoader::iterable(Unsized).batch_size(2).build().unwrap();
    for e in [
        stream.len().map(drop).unwrap_err(),
        stream.is_empty().map(drop).unwrap_err(),
    ] {
        assert!(e.to_string().contains("len_hint"), "{e}");
    }
    assert_eq!(collect_i64(&stream), [vec![0, 1], vec![2, 3], vec![4]]);
    let sized = DataLoader::iterable(Stream { n: 0, shard: false }).build().unwrap();
    assert!(sized.is_empty().unwrap());
    // The datasets themselves (`len(ds) == 0`), and a boxed stream keeps
    // its length hint, so a loader over it still has a length.
    assert!(Numbers::new(0).is_empty() && !Numbers::new(2).is_empty());
    let boxed: Box<dyn IterableDataset<Item = i64> + Send + Sync> = Box::new(Stream { n: 5, shard: false });
    assert_eq!(boxed.len_hint(), Some(5));
    let loader = DataLoader::iterable(boxed).batch_size(2).build().unwrap();
    assert_eq!(loader.len().unwrap(), 3);
    let unsized_box: Box<dyn IterableDataset<Item = i64>> = Box::new(Unsized);
    assert_eq!(unsized_box.len_hint(), None);
    // Samplers (`len(sampler) == 0`): an empty one, a full one, and batch
    // samplers whose last batch is kept or dropped.
    assert!(SequentialSampler::new(0).is_empty() && !SequentialSampler::new(2).is_empty());
    assert!(
        !BatchSampler::new(SequentialSampler::new(2), 3, false)
            .unwrap()
            .is_empty()
    );
    assert!(
        BatchSampler::new(SequentialSampler::new(2), 3, true)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn default_collate_of_structures() {
    let t = |v: f32| Tensor::full(2, v).unwrap();
    // Tuples of tensors and numbers: float64, int64, own dtypes.
    let (x, a, b, c, d, e) = DefaultCollate
        .collate(vec![
            (t(1.0), 1i64, 0.5f64, 1.5f32, true, 7u8),
            (t(2.0), 2, 0.25, 2.5, false, 8),
        ])
        .unwrap();
    assert_eq!(x.shape(), [2, 2]);
    assert_eq!(
        [a.dtype(), b.dtype(), c.dtype(), d.dtype(), e.dtype()],
        [DType::I64, DType::F64, DType::F32, DType::Bool, DType::U8]
    );
    assert_eq!(b.to_vec::<f64>().unwrap(), [0.5, 0.25]);
    // Vec items collate position by position.
    let v = DefaultCollate
        .collate(vec![vec![1i64, 2], vec![3, 4], vec![5, 6]])
        .unwrap();
    assert_eq!(v[0].to_vec::<i64>().unwrap(), [1, 3, 5]);
    assert!(DefaultCollate.collate(vec![vec![1i64, 2], vec![3]]).is_err());
    // Maps collate key by key.
    let m = |k: i64| HashMap::from([("x".to_string(), t(k as f32)), ("y".to_string(), t(-k as f32))]);
    let batch = DefaultCollate.collate(vec![m(1), m(2)]).unwrap();
    assert_eq!(batch["y"].to_vec::<f32>().unwrap(), [-1.0, -1.0, -2.0, -2.0]);
    let bm = |k: i64| BTreeMap::from([("label", k), ("id", 10 * k)]);
    let batch = DefaultCollate.collate(vec![bm(1), bm(2)]).unwrap();
    assert_eq!(batch["id"].to_vec::<i64>().unwrap(), [10, 20]);
    let missing = DefaultCollate.collate(vec![bm(1), BTreeMap::from([("label", 1)])]);
    assert!(missing.unwrap_err().to_string().contains("\"id\""));
    // Strings stay a list; tensors of different shapes do not stack.
    let s = DefaultCollate
        .collate(vec![("a".to_string(), 1i64), ("b".to_string(), 2)])
        .unwrap();
    assert_eq!(s.0, ["a", "b"]);
    assert!(DefaultCollate.collate(vec![t(1.0), Tensor::zeros(3).unwrap()]).is_err());
}

#[test]
fn custom_collate_fn() {
    let loader = DataLoader::builder(Numbers::new(7))
        .batch_size(3)
        .collate_fn(|items: Vec<i64>| -> Result<i64> { Ok(items.iter().sum()) })
        .num_workers(2)
        .build()
        .unwrap();
    let sums: Vec<i64> = loader.iter().unwrap().map(|b| b.unwrap()).collect();
    assert_eq!(sums, [3, 12, 6]);
}

#[test]
fn datasets_subset_concat_and_errors() {
    let a = TensorDataset::new(vec![Tensor::arange(3).unwrap()]).unwrap();
    let b = TensorDataset::new(vec![Tensor::arange_step(10, 15, 1).unwrap()]).unwrap();
    let c = ConcatDataset::new(vec![a.clone(), b]).unwrap();
    assert_eq!((c.len(), c.cumulative_sizes()), (8, &[3usize, 8][..]));
    // `c.datasets`: the parts, in order.
    let parts: Vec<usize> = c.datasets().iter().map(|d| d.len()).collect();
    assert_eq!(parts, [3, 5]);
    assert_eq!(c.datasets()[1].get(0).unwrap()[0].item::<i64>().unwrap(), 10);
    let at = |i| c.get(i).unwrap()[0].item::<i64>().unwrap();
    assert_eq!([at(0), at(2), at(3), at(7)], [0, 2, 10, 14]);
    assert!(matches!(
        c.get(8),
        Err(DataError::IndexOutOfRange { index: 8, len: 8, .. })
    ));
    assert!(ConcatDataset::<TensorDataset>::new(vec![]).is_err());

    let s = Subset::new(c.clone(), vec![7, 0]);
    assert_eq!(s.get(0).unwrap()[0].item::<i64>().unwrap(), 14);
    assert!(s.get(2).is_err());
    assert!(Subset::new(c, vec![9]).get(0).is_err());

    let e = TensorDataset::new((Tensor::zeros((3, 2)).unwrap(), Tensor::zeros(4).unwrap()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Size mismatch between tensors") && e.contains("tensor 1 has 4"),
        "{e}"
    );
    assert!(TensorDataset::new(vec![]).is_err());
    assert!(TensorDataset::new(Tensor::scalar(1.0f32)).is_err());
    assert!(a.get(3).is_err());

    // random_split: lengths must add up; fractions must add up to 1.
    assert!(ferrotorch_data::random_split(&a, &[1, 1], None).is_err());
    assert!(ferrotorch_data::random_split_fractions(&a, &[0.5, 0.6], None).is_err());
    assert!(ferrotorch_data::random_split_fractions(&a, &[1.5, -0.5], None).is_err());
    // PyTorch's quirk: integer lengths adding up to 1 are fractions.
    let parts = ferrotorch_data::random_split(&a, &[0, 1], Some(&Generator::new(0))).unwrap();
    assert_eq!((parts[0].len(), parts[1].len()), (0, 3));
}

#[test]
fn sampler_checks() {
    use ferrotorch_data::{DistributedSampler, RandomSampler, Sampler};
    assert!(DistributedSampler::new(10, 2, 2).is_err());
    assert!(DistributedSampler::new(10, 0, 0).is_err());
    assert!(RandomSampler::with_options(5, true, Some(0), None).is_err());
    assert!(WeightedRandomSampler::new(&[1.0], 0, true, None).is_err());
    // Bad weights are an error of the epoch, not a panic.
    let w = WeightedRandomSampler::new(&[-1.0, 1.0], 2, true, None).unwrap();
    assert!(w.iter().any(|r| r.is_err()));
    // A DistributedSampler of an empty dataset yields nothing.
    assert_eq!(DistributedSampler::new(0, 2, 1).unwrap().iter().count(), 0);
}

#[test]
fn loaders_and_iterators_can_move_between_threads() {
    fn send_sync<X: Send + Sync>(_: &X) {}
    fn send<X: Send>(_: &X) {}
    let loader = DataLoader::builder(Numbers::new(8))
        .batch_size(4)
        .num_workers(2)
        .build()
        .unwrap();
    send_sync(&loader);
    let it = loader.iter().unwrap();
    send(&it);
    let got = std::thread::scope(|s| {
        s.spawn(move || it.map(|b| b.unwrap().numel()).sum::<usize>())
            .join()
            .unwrap()
    });
    assert_eq!(got, 8);
    // Datasets of different types with one item type, boxed.
    type Boxed = Box<dyn Dataset<Item = i64> + Send + Sync>;
    let parts: Vec<Boxed> = vec![
        Box::new(Numbers::new(2)),
        Box::new(Subset::new(Numbers::new(10), vec![9])),
    ];
    let loader = DataLoader::builder(ConcatDataset::new(parts).unwrap())
        .batch_size(3)
        .build()
        .unwrap();
    assert_eq!(collect_i64(&loader), [vec![0, 1, 9]]);
}
