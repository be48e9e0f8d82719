//! libstdc++'s (GCC) `std::partial_sort`, `std::nth_element` and
//! `std::sort`, step for step: PyTorch's CPU `topk` sorts with them, so
//! the order they leave equal values in is the order `multinomial` returns
//! tied categories in. `less(a, b)` is the comparator; ranges are
//! `[first, last)` of `a`.

fn adjust_heap<T: Copy>(
    a: &mut [T],
    first: usize,
    mut hole: usize,
    len: usize,
    value: T,
    less: &impl Fn(&T, &T) -> bool,
) {
    let top = hole;
    let mut child = hole;
    while len > 0 && child < (len - 1) / 2 {
        child = 2 * (child + 1);
        if less(&a[first + child], &a[first + child - 1]) {
            child -= 1;
        }
        a[first + hole] = a[first + child];
        hole = child;
    }
    if len & 1 == 0 && len >= 2 && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        a[first + hole] = a[first + child - 1];
        hole = child - 1;
    }
    // __push_heap
    while hole > top {
        let parent = (hole - 1) / 2;
        if !less(&a[first + parent], &value) {
            break;
        }
        a[first + hole] = a[first + parent];
        hole = parent;
    }
    a[first + hole] = value;
}

fn make_heap<T: Copy>(a: &mut [T], first: usize, last: usize, less: &impl Fn(&T, &T) -> bool) {
    let len = last - first;
    if len < 2 {
        return;
    }
    let mut parent = (len - 2) / 2;
    loop {
        let v = a[first + parent];
        adjust_heap(a, first, parent, len, v, less);
        if parent == 0 {
            return;
        }
        parent -= 1;
    }
}

fn pop_heap<T: Copy>(a: &mut [T], first: usize, last: usize, result: usize, less: &impl Fn(&T, &T) -> bool) {
    let v = a[result];
    a[result] = a[first];
    adjust_heap(a, first, 0, last - first, v, less);
}

fn heap_select<T: Copy>(a: &mut [T], first: usize, middle: usize, last: usize, less: &impl Fn(&T, &T) -> bool) {
    make_heap(a, first, middle, less);
    for i in middle..last {
        if less(&a[i], &a[first]) {
            pop_heap(a, first, middle, i, less);
        }
    }
}

fn sort_heap<T: Copy>(a: &mut [T], first: usize, mut last: usize, less: &impl Fn(&T, &T) -> bool) {
    while last - first > 1 {
        last -= 1;
        pop_heap(a, first, last, last, less);
    }
}

/// `std::partial_sort(first, middle, last)`.
pub(super) fn partial_sort<T: Copy>(
    a: &mut [T],
    first: usize,
    middle: usize,
    last: usize,
    less: &impl Fn(&T, &T) -> bool,
) {
    heap_select(a, first, middle, last, less);
    sort_heap(a, first, middle, less);
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

fn partition_pivot<T: Copy>(a: &mut [T], first: usize, last: usize, less: &impl Fn(&T, &T) -> bool) -> usize {
    let mid = first + (last - first) / 2;
    move_median_to_first(a, first, first + 1, mid, last - 1, less);
    unguarded_partition(a, first + 1, last, first, less)
}

fn unguarded_linear_insert<T: Copy>(a: &mut [T], mut last: usize, less: &impl Fn(&T, &T) -> bool) {
    let val = a[last];
    let mut next = last - 1;
    while less(&val, &a[next]) {
        a[last] = a[next];
        last = next;
        next -= 1;
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

/// `floor(log2(n))` (`std::__lg`), for `n >= 1`.
fn lg(n: usize) -> usize {
    (usize::BITS - 1 - n.leading_zeros()) as usize
}

/// `std::nth_element(first, nth, last)` (introselect).
pub(super) fn nth_element<T: Copy>(
    a: &mut [T],
    mut first: usize,
    nth: usize,
    mut last: usize,
    less: &impl Fn(&T, &T) -> bool,
) {
    if first == last || nth == last {
        return;
    }
    let mut depth = 2 * lg(last - first);
    while last - first > 3 {
        if depth == 0 {
            heap_select(a, first, nth + 1, last, less);
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

const THRESHOLD: usize = 16;

fn introsort_loop<T: Copy>(
    a: &mut [T],
    first: usize,
    mut last: usize,
    mut depth: usize,
    less: &impl Fn(&T, &T) -> bool,
) {
    while last - first > THRESHOLD {
        if depth == 0 {
            partial_sort(a, first, last, last, less);
            return;
        }
        depth -= 1;
        let cut = partition_pivot(a, first, last, less);
        introsort_loop(a, cut, last, depth, less);
        last = cut;
    }
}

/// `std::sort(first, last)` (introsort, then a final insertion sort).
pub(super) fn sort<T: Copy>(a: &mut [T], first: usize, last: usize, less: &impl Fn(&T, &T) -> bool) {
    if first == last {
        return;
    }
    introsort_loop(a, first, last, 2 * lg(last - first), less);
    if last - first > THRESHOLD {
        insertion_sort(a, first, first + THRESHOLD, less);
        for i in first + THRESHOLD..last {
            unguarded_linear_insert(a, i, less);
        }
    } else {
        insertion_sort(a, first, last, less);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_and_selects() {
        let less = |a: &(i32, usize), b: &(i32, usize)| a.0 > b.0;
        let base: Vec<(i32, usize)> = (0..200).map(|i| (((i * 7919) % 37) as i32, i)).collect();
        let mut v = base.clone();
        sort(&mut v, 0, 200, &less);
        assert!(v.windows(2).all(|w| w[0].0 >= w[1].0));
        let mut v = base.clone();
        partial_sort(&mut v, 0, 10, 200, &less);
        assert!(v[..10].windows(2).all(|w| w[0].0 >= w[1].0));
        assert!(v[10..].iter().all(|x| x.0 <= v[9].0));
        let mut v = base.clone();
        nth_element(&mut v, 0, 50, 200, &less);
        assert!(v[..50].iter().all(|x| x.0 >= v[50].0));
        assert!(v[51..].iter().all(|x| x.0 <= v[50].0));
        let mut sorted: Vec<usize> = v.iter().map(|x| x.1).collect();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..200).collect::<Vec<_>>());
    }
}
