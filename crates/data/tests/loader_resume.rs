//! `DataLoader::iter_from`: an epoch resumed mid-way from the generator's
//! state at the epoch's start gives the batches the whole epoch gave from
//! that point, with and without workers, and each batch is still loaded by
//! the worker (and so with the seed) it had.

use std::sync::Mutex;

use ferrotorch_core::{Generator, Tensor, manual_seed};
use ferrotorch_data::{DataLoader, Dataset, ItemIter, IterableDataset, Result, get_worker_info};

/// The tests that draw from the global generator run one at a time.
static GLOBAL: Mutex<()> = Mutex::new(());

/// Item `i` is `(i, seed of the worker loading it)` (-1 on the main thread).
struct Indexed(usize);

impl Dataset for Indexed {
    type Item = (i64, i64);
    fn len(&self) -> usize {
        self.0
    }
    fn get(&self, index: usize) -> Result<(i64, i64)> {
        Ok((index as i64, get_worker_info().map_or(-1, |w| w.seed as i64)))
    }
}

type Batch = (Vec<i64>, Vec<i64>);

fn batches(it: impl Iterator<Item = Result<(Tensor, Tensor)>>) -> Vec<Batch> {
    it.map(|b| {
        let (i, s) = b.unwrap();
        (i.to_vec::<i64>().unwrap(), s.to_vec::<i64>().unwrap())
    })
    .collect()
}

fn loader(n: usize, batch: usize, drop_last: bool, workers: usize, g: Option<&Generator>) -> DataLoader<(i64, i64)> {
    let b = DataLoader::builder(Indexed(n))
        .batch_size(batch)
        .shuffle(true)
        .drop_last(drop_last)
        .num_workers(workers);
    match g {
        Some(g) => b.generator(g.clone()),
        None => b,
    }
    .build()
    .unwrap()
}

#[test]
fn resumed_epochs_continue_the_whole_epoch() {
    for workers in [0, 1, 2, 3] {
        for (n, batch, drop_last) in [(23, 4, false), (23, 4, true), (24, 4, false), (5, 8, false)] {
            let g = Generator::new(7);
            let l = loader(n, batch, drop_last, workers, Some(&g));
            // Two epochs, so the second starts from a generator that moved.
            let _ = batches(l.iter().unwrap());
            let at_start = g.get_state();
            let whole = batches(l.iter().unwrap());
            let after_whole = g.get_state();
            for start in 0..=whole.len() + 1 {
                g.set_state(at_start.clone());
                let rest = batches(l.iter_from(start).unwrap());
                let want = &whole[start.min(whole.len())..];
                assert_eq!(rest, want, "workers {workers}, n {n}, batch {batch}, start {start}");
                assert!(
                    g.get_state() == after_whole,
                    "the generator ends where the whole epoch left it"
                );
            }
        }
    }
}

#[test]
fn resumed_epochs_with_the_global_generator() {
    let _guard = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    for workers in [0, 2] {
        let l = loader(30, 4, false, workers, None);
        manual_seed(3);
        let state = ferrotorch_core::get_rng_state().unwrap();
        let whole = batches(l.iter().unwrap());
        ferrotorch_core::set_rng_state(&state).unwrap();
        assert_eq!(batches(l.iter_from(5).unwrap()), &whole[5..], "workers {workers}");
    }
}

/// `0..n` as a stream.
struct Stream(i64);

impl IterableDataset for Stream {
    type Item = i64;
    fn iter(&self) -> ItemIter<'_, i64> {
        Box::new((0..self.0).map(Ok))
    }
}

#[test]
fn streams_load_and_drop_the_skipped_batches() {
    for workers in [0, 1] {
        let l = DataLoader::iterable(Stream(10))
            .batch_size(3)
            .num_workers(workers)
            .build()
            .unwrap();
        let got: Vec<Vec<i64>> = l
            .iter_from(2)
            .unwrap()
            .map(|b| b.unwrap().to_vec::<i64>().unwrap())
            .collect();
        assert_eq!(got, vec![vec![6, 7, 8], vec![9]], "workers {workers}");
        assert_eq!(l.iter_from(9).unwrap().count(), 0);
    }
}
