//! Criterion per-op benches for regressions (absolute times; compare a change
//! against its parent on the same machine). The PyTorch comparison is `bench/run.sh`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use ferrotorch::Tensor;

fn ops(c: &mut Criterion) {
    let a = Tensor::randn([1 << 20]).unwrap();
    let b = Tensor::randn([1 << 20]).unwrap();
    c.bench_function("add_1m", |bch| bch.iter(|| black_box(a.add(&b).unwrap())));
    c.bench_function("exp_1m", |bch| bch.iter(|| black_box(a.exp().unwrap())));
    let m = Tensor::randn([512, 512]).unwrap();
    c.bench_function("sgemm_512", |bch| bch.iter(|| black_box(m.mm(&m).unwrap())));
    c.bench_function("sum_rows_512", |bch| {
        bch.iter(|| black_box(m.sum_dim(1, false).unwrap()))
    });
    c.bench_function("softmax_rows_512", |bch| bch.iter(|| black_box(m.softmax(1).unwrap())));
    let s = Tensor::randn([1]).unwrap();
    c.bench_function("add_1elem", |bch| bch.iter(|| black_box(s.add(&s).unwrap())));
}

criterion_group!(benches, ops);
criterion_main!(benches);
