//! The selection and sorting algorithms PyTorch's CPU kernels call, step
//! for step, so that the order they leave equal elements in (which the C++
//! standard leaves unspecified) is PyTorch's: GCC libstdc++'s `std::sort`
//! (introsort), `std::nth_element` (introselect) and `std::partial_sort`
//! (heap select), and the TH quickselect (Sedgewick's partition) behind
//! `kthvalue`. `topk` picks indices among ties, `mode` and `kthvalue` pick
//! them among equal values, with these.
//!
//! Every function works on a slice with a comparator `less` (a strict weak
//! order for well-defined results; NaN-aware comparators keep it one).

/// `__adjust_heap`: sifts the hole at `hole` down, then pushes `value` up.
fn adjust_heap<T: Copy>(a: &mut [T], mut hole: usize, len: usize, value: T, less: &impl Fn(&T, &T) -> bool) {
    let top = hole;
    let mut child = hole;
    while len > 2 && child < (len - 1) / 2 {
        child = 2 * (child + 1);
        if less(&a[child], &a[child - 1]) {
            child -= 1;
        }
        a[hole] = a[child];
        hole = child;
    }
    if len >= 2 && len & 1 == 0 && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        a[hole] = a[child - 1];
        hole = child - 1;
    }
    while hole > top {
        let parent = (hole - 1) / 2;
        if !less(&a[parent], &value) {
            break;
        }
        a[hole] = a[parent];
        hole = parent;
    }
    a[hole] = value;
}

fn make_heap<T: Copy>(a: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let len = a.len();
    if len < 2 {
        return;
    }
    let mut parent = (len - 2) / 2;
    loop {
        adjust_heap(a, parent, len, a[parent], less);
        if parent == 0 {
            return;
        }
        parent -= 1;
    }
}

/// `__pop_heap` of the heap `a[..last]` into `a[result]`.
fn pop_heap<T: Copy>(a: &mut [T], last: usize, result: usize, less: &impl Fn(&T, &T) -> bool) {
    let value = a[result];
    a[result] = a[0];
    adjust_heap(a, 0, last, value, less);
}

/// `__heap_select`: the smallest `middle` elements into a max-heap at the front.
fn heap_select<T: Copy>(a: &mut [T], middle: usize, less: &impl Fn(&T, &T) -> bool) {
    make_heap(&mut a[..middle], less);
    for i in middle..a.len() {
        if less(&a[i], &a[0]) {
            pop_heap(a, middle, i, less);
        }
    }
}

fn sort_heap<T: Copy>(a: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let mut last = a.len();
    while last > 1 {
        last -= 1;
        pop_heap(a, last, last, less);
    }
}

/// `std::partial_sort(a.begin(), a.begin() + middle, a.end(), less)`.
pub(crate) fn partial_sort<T: Copy>(a: &mut [T], middle: usize, less: &impl Fn(&T, &T) -> bool) {
    heap_select(a, middle, less);
    sort_heap(&mut a[..middle], less);
}

fn move_median_to_first<T: Copy>(
    a: &mut [T],
    result: usize,
    x: usize,
    y: usize,
    z: usize,
    less: &impl Fn(&T, &T) -> bool,
) {
    let m = if less(&a[x], &a[y]) {
        if less(&a[y], &a[z]) {
            y
        } else if less(&a[x], &a[z]) {
            z
        } else {
            x
        }
    } else if less(&a[x], &a[z]) {
        x
    } else if less(&a[y], &a[z]) {
        z
    } else {
        y
    };
    a.swap(result, m);
}

/// `__unguarded_partition` of `a[first..last]` around `a[pivot]`.
fn unguarded_partition<T: Copy>(
    a: &mut [T],
    mut first: usize,
    mut last: usize,
    pivot: usize,
    less: &impl Fn(&T, &T) -> bool,
) -> usize {
    loop {
        while less(&a[first], &a[pivot]) {
            first += 1;
        }
        last -= 1;
        while less(&a[pivot], &a[last]) {
            last -= 1;
        }
        if first >= last {
            return first;
        }
        a.swap(first, last);
        first += 1;
    }
}

/// `__unguarded_partition_pivot` of `a[first..last]`.
fn partition_pivot<T: Copy>(a: &mut [T], first: usize, last: usize, less: &impl Fn(&T, &T) -> bool) -> usize {
    let mid = first + (last - first) / 2;
    move_median_to_first(a, first, first + 1, mid, last - 1, less);
    unguarded_partition(a, first + 1, last, first, less)
}

fn unguarded_linear_insert<T: Copy>(a: &mut [T], mut last: usize, less: &impl Fn(&T, &T) -> bool) {
    let val = a[last];
    while less(&val, &a[last - 1]) {
        a[last] = a[last - 1];
        last -= 1;
    }
    a[last] = val;
}

fn insertion_sort<T: Copy>(a: &mut [T], first: usize, last: usize, less: &impl Fn(&T, &T) -> bool) {
    if first == last {
        return;
    }
    for i in first + 1..last {
        if less(&a[i], &a[first]) {
            let val = a[i];
            a.copy_within(first..i, first + 1);
            a[first] = val;
        } else {
            unguarded_linear_insert(a, i, less);
        }
    }
}

/// `2 * floor(log2(n))`, libstdc++'s depth limit.
fn depth_limit(n: usize) -> usize {
    2 * (usize::BITS - 1 - n.leading_zeros()) as usize
}

/// `std::nth_element(a.begin(), a.begin() + nth, a.end(), less)`.
pub(crate) fn nth_element<T: Copy>(a: &mut [T], nth: usize, less: &impl Fn(&T, &T) -> bool) {
    let (mut first, mut last) = (0, a.len());
    if first == last || nth == last {
        return;
    }
    let mut depth = depth_limit(last - first);
    while last - first > 3 {
        if depth == 0 {
            heap_select(&mut a[first..last], nth + 1 - first, less);
            a.swap(first, nth);
            return;
        }
        depth -= 1;
        let cut = partition_pivot(a, first, last, less);
        if cut <= nth {
            first = cut;
        } else {
            last = cut;
        }
    }
    insertion_sort(a, first, last, less);
}

fn introsort_loop<T: Copy>(
    a: &mut [T],
    first: usize,
    mut last: usize,
    mut depth: usize,
    less: &impl Fn(&T, &T) -> bool,
) {
    while last - first > 16 {
        if depth == 0 {
            let n = last - first;
            partial_sort(&mut a[first..last], n, less);
            return;
        }
        depth -= 1;
        let cut = partition_pivot(a, first, last, less);
        introsort_loop(a, cut, last, depth, less);
        last = cut;
    }
}

/// `std::sort(a.begin(), a.end(), less)` (not stable).
pub(crate) fn sort<T: Copy>(a: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let n = a.len();
    if n == 0 {
        return;
    }
    introsort_loop(a, 0, n, depth_limit(n), less);
    if n > 16 {
        insertion_sort(a, 0, 16, less);
        for i in 16..n {
            unguarded_linear_insert(a, i, less);
        }
    } else {
        insertion_sort(a, 0, n, less);
    }
}

/// PyTorch's `quick_select_template` (TH's Sedgewick partition with a
/// median-of-three pivot): afterwards `a[k]` is the element of rank `k`
/// under `gt` ("greater than", NaN-aware), with `swap` applied to every
/// exchange (the indices travel with the values).
pub(crate) fn quick_select<T: Copy>(a: &mut [T], k: usize, gt: &impl Fn(&T, &T) -> bool) {
    if a.is_empty() {
        return;
    }
    let (mut l, mut r) = (0usize, a.len() - 1);
    loop {
        if r <= l {
            return;
        }
        if r == l + 1 {
            if gt(&a[l], &a[r]) {
                a.swap(l, r);
            }
            return;
        }
        let p = (l + r) >> 1;
        a.swap(p, l + 1);
        if gt(&a[l + 1], &a[r]) {
            a.swap(l + 1, r);
        }
        if gt(&a[l], &a[r]) {
            a.swap(l, r);
        }
        if gt(&a[l + 1], &a[l]) {
            a.swap(l + 1, l);
        }
        let (mut i, mut j) = (l + 1, r);
        let piv = a[l];
        loop {
            i += 1;
            while gt(&piv, &a[i]) {
                i += 1;
            }
            j -= 1;
            while gt(&a[j], &piv) {
                j -= 1;
            }
            if j < i {
                break;
            }
            a.swap(i, j);
        }
        a.swap(l, j);
        if j <= k {
            l = i;
        }
        if j >= k {
            r = j - 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn the_algorithms_order_and_select_correctly() {
        let mut seed = 7;
        for n in [0usize, 1, 2, 3, 4, 5, 16, 17, 33, 100, 1000] {
            let v: Vec<(u64, usize)> = (0..n).map(|i| (lcg(&mut seed) % 10, i)).collect();
            let less = |a: &(u64, usize), b: &(u64, usize)| a.0 < b.0;
            let mut want = v.clone();
            want.sort_by_key(|p| p.0);
            let mut s = v.clone();
            sort(&mut s, &less);
            assert!(s.iter().map(|p| p.0).eq(want.iter().map(|p| p.0)), "sort {n}");
            for k in [0, n / 3, n / 2, n.saturating_sub(1)] {
                if k >= n {
                    continue;
                }
                let mut a = v.clone();
                nth_element(&mut a, k, &less);
                assert_eq!(a[k].0, want[k].0, "nth_element {n} {k}");
                assert!(a[..k].iter().all(|p| p.0 <= a[k].0) && a[k..].iter().all(|p| p.0 >= a[k].0));
                let mut q = v.clone();
                quick_select(&mut q, k, &|a: &(u64, usize), b: &(u64, usize)| a.0 > b.0);
                assert_eq!(q[k].0, want[k].0, "quick_select {n} {k}");
                let mut p = v.clone();
                partial_sort(&mut p, k + 1, &less);
                assert!(
                    p[..=k].iter().map(|p| p.0).eq(want[..=k].iter().map(|p| p.0)),
                    "partial_sort"
                );
            }
            // Every element survives.
            let mut idx: Vec<usize> = s.iter().map(|p| p.1).collect();
            idx.sort_unstable();
            assert!(idx.into_iter().eq(0..n));
        }
    }
}
