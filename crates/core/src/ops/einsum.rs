//! `einsum`: PyTorch's parser and error messages, ellipsis broadcasting,
//! repeated subscripts as diagonals, and a flop-minimising pairwise
//! contraction order, each pair lowered to one batched GEMM through
//! permute/reshape. A composite: autograd records the pieces.

use crate::{Error, Result, Tensor};

/// A label: 0..52 for `A-Z a-z` (PyTorch's order), 52.. for ellipsis dims
/// (aligned from the right: `52 + k` is the k-th of the broadcast ellipsis).
type Label = usize;
const ELL: Label = 52;

fn label_of(c: u8) -> Option<Label> {
    match c {
        b'A'..=b'Z' => Some((c - b'A') as usize),
        b'a'..=b'z' => Some((c - b'a') as usize + 26),
        _ => None,
    }
}

/// One operand's subscripts: letters and the position of its ellipsis.
struct Term {
    labels: Vec<Label>,
    ellipsis: Option<usize>,
}

/// The output subscripts (after `->`), with PyTorch's messages.
fn parse_output(s: &[u8], offset: usize) -> Result<Term> {
    let mut labels = Vec::new();
    let mut ellipsis = None;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b' ' => i += 1,
            b'.' => {
                if ellipsis.is_some() {
                    return Err(Error::invalid(
                        "einsum",
                        "einsum(): found '.' for output but an ellipsis (...) was already found",
                    ));
                }
                if !(i + 2 < s.len() && s[i + 1] == b'.' && s[i + 2] == b'.') {
                    return Err(Error::invalid(
                        "einsum",
                        "einsum(): found '.' for output that is not part of any ellipsis (...)",
                    ));
                }
                ellipsis = Some(labels.len());
                i += 3;
            }
            c => {
                let Some(l) = label_of(c) else {
                    return Err(Error::invalid(
                        "einsum",
                        format!(
                            "einsum(): invalid subscript given at index {} in the equation string, subscripts must be in [a-zA-Z]",
                            offset + i
                        ),
                    ));
                };
                labels.push(l);
                i += 1;
            }
        }
    }
    Ok(Term { labels, ellipsis })
}

fn parse_term(s: &[u8], operand: usize, offset: usize) -> Result<Term> {
    let mut labels = Vec::new();
    let mut ellipsis = None;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c == b'.' {
            if ellipsis.is_some() {
                return Err(Error::invalid(
                    "einsum",
                    format!("einsum(): found '.' for operand {operand} for which an ellipsis was already found"),
                ));
            }
            if !(i + 2 < s.len() && s[i + 1] == b'.' && s[i + 2] == b'.') {
                return Err(Error::invalid(
                    "einsum",
                    format!("einsum(): found '.' for operand {operand} that is not part of any ellipsis"),
                ));
            }
            ellipsis = Some(labels.len());
            i += 3;
            continue;
        }
        if c == b' ' {
            i += 1;
            continue;
        }
        let Some(l) = label_of(c) else {
            return Err(Error::invalid(
                "einsum",
                format!(
                    "einsum(): invalid subscript given at index {} in the equation string, subscripts must be in [a-zA-Z]",
                    offset + i
                ),
            ));
        };
        labels.push(l);
        i += 1;
    }
    Ok(Term { labels, ellipsis })
}

/// A tensor with one label per dim.
#[derive(Clone)]
struct Labelled {
    t: Tensor,
    labels: Vec<Label>,
}

fn size_of(x: &Labelled, l: Label) -> Option<usize> {
    x.labels.iter().position(|&m| m == l).map(|p| x.t.shape()[p])
}

/// `torch.einsum(equation, operands)`.
pub fn einsum(equation: &str, operands: &[&Tensor]) -> Result<Tensor> {
    if operands.is_empty() {
        return Err(Error::invalid("einsum", "einsum(): must provide at least one operand"));
    }
    let eq = equation.as_bytes();
    let (lhs, rhs) = match equation.find("->") {
        Some(p) => (&eq[..p], Some((&eq[p + 2..], p + 2))),
        None => (eq, None),
    };
    let mut terms = Vec::new();
    let mut start = 0;
    for (k, part) in lhs.split(|&c| c == b',').enumerate() {
        if k >= operands.len() {
            return Err(Error::invalid(
                "einsum",
                "einsum(): fewer operands were provided than specified in the equation",
            ));
        }
        terms.push(parse_term(part, k, start)?);
        start += part.len() + 1;
    }
    if terms.len() < operands.len() {
        return Err(Error::invalid(
            "einsum",
            "einsum(): more operands were provided than specified in the equation",
        ));
    }
    // Ellipsis dims per operand, and the broadcast ellipsis rank.
    let mut ell_ndim = 0;
    for (k, (term, x)) in terms.iter().zip(operands).enumerate() {
        let n = term.labels.len();
        match term.ellipsis {
            None if n != x.ndim() => {
                return Err(Error::invalid(
                    "einsum",
                    format!(
                        "einsum(): the number of subscripts in the equation ({n}) does not match the number of dimensions ({}) for operand {k} and no ellipsis was given",
                        x.ndim()
                    ),
                ));
            }
            Some(_) if n > x.ndim() => {
                return Err(Error::invalid(
                    "einsum",
                    format!(
                        "einsum(): the number of subscripts in the equation ({n}) is more than the number of dimensions ({}) for operand {k}",
                        x.ndim()
                    ),
                ));
            }
            Some(_) => ell_ndim = ell_ndim.max(x.ndim() - n),
            None => {}
        }
    }
    // Each operand's label per dim.
    let mut counts = [0usize; 52];
    let mut inputs = Vec::new();
    for (term, x) in terms.iter().zip(operands) {
        for &l in &term.labels {
            counts[l] += 1;
        }
        let mut labels = term.labels.clone();
        if let Some(p) = term.ellipsis {
            let e = x.ndim() - term.labels.len();
            let ell: Vec<Label> = (ell_ndim - e..ell_ndim).map(|j| ELL + j).collect();
            labels.splice(p..p, ell);
        }
        inputs.push(Labelled {
            t: (*x).clone(),
            labels,
        });
    }
    // Output labels.
    let output: Vec<Label> = match rhs {
        None => {
            let mut out: Vec<Label> = (0..ell_ndim).map(|j| ELL + j).collect();
            out.extend((0..52).filter(|&l| counts[l] == 1));
            out
        }
        Some((r, offset)) => {
            let term = parse_output(r, offset)?;
            let mut seen = [false; 52];
            for &l in &term.labels {
                let c = if l < 26 { b'A' + l as u8 } else { b'a' + (l - 26) as u8 } as char;
                if seen[l] {
                    return Err(Error::invalid(
                        "einsum",
                        format!("einsum(): output subscript {c} appears more than once in the output"),
                    ));
                }
                seen[l] = true;
                if counts[l] == 0 {
                    return Err(Error::invalid(
                        "einsum",
                        format!("einsum(): output subscript {c} does not appear in the equation for any input operand"),
                    ));
                }
            }
            let mut out = term.labels.clone();
            let ell: Vec<Label> = (0..ell_ndim).map(|j| ELL + j).collect();
            // Without an ellipsis in the output, its dims are summed.
            if let Some(p) = term.ellipsis {
                out.splice(p..p, ell);
            }
            out
        }
    };
    // Check sizes as PyTorch does, operand by operand and dim by dim: a
    // label's (or an ellipsis dim's) sizes must agree or be 1 (broadcast),
    // a label repeated in one operand must have one size there.
    let mut size = vec![1usize; ELL + ell_ndim];
    let letter = |l: Label| if l < 26 { b'A' + l as u8 } else { b'a' + (l - 26) as u8 } as char;
    for (k, x) in inputs.iter().enumerate() {
        for (d, &l) in x.labels.iter().enumerate() {
            let s = x.t.shape()[d];
            if l >= ELL {
                if s != 1 {
                    if size[l] != 1 && size[l] != s {
                        return Err(Error::invalid(
                            "einsum",
                            format!(
                                "einsum(): dimension {d} covered by ellipsis in operand {k}has size {s} which does not broadcast with previously seen ellipsis with size {} for the respective dimension",
                                size[l]
                            ),
                        ));
                    }
                    size[l] = s;
                }
            } else if let Some(p) = x.labels[..d].iter().position(|&m| m == l) {
                let s0 = x.t.shape()[p];
                if s0 != s {
                    return Err(Error::invalid(
                        "einsum",
                        format!(
                            "einsum(): subscript {} is repeated for operand {k} but the sizes don't match, {s} != {s0}",
                            letter(l)
                        ),
                    ));
                }
            } else if s != 1 {
                if size[l] != 1 && size[l] != s {
                    return Err(Error::invalid(
                        "einsum",
                        format!(
                            "einsum(): subscript {} has size {s} for operand {k} which does not broadcast with previously seen size {}",
                            letter(l),
                            size[l]
                        ),
                    ));
                }
                size[l] = s;
            }
        }
    }
    // Diagonals of repeated labels.
    for x in inputs.iter_mut() {
        *x = take_diagonals(x.clone())?;
    }
    // Sum labels that appear in one operand only and not in the output.
    let in_output = |l: Label| output.contains(&l);
    let mut owners = vec![0usize; size.len()];
    for x in &inputs {
        for &l in &x.labels {
            owners[l] += 1;
        }
    }
    for x in inputs.iter_mut() {
        let dims: Vec<i64> = (0..x.labels.len())
            .filter(|&d| owners[x.labels[d]] == 1 && !in_output(x.labels[d]))
            .map(|d| d as i64)
            .collect();
        *x = sum_dims(x, &dims)?;
    }
    let mut result = if inputs.len() == 1 {
        inputs.pop().unwrap_or_else(|| unreachable!())
    } else {
        contract_all(inputs, &output, &size)?
    };
    // Labels left that the output does not keep (the single-operand case).
    let dims: Vec<i64> = (0..result.labels.len())
        .filter(|&d| !in_output(result.labels[d]))
        .map(|d| d as i64)
        .collect();
    result = sum_dims(&result, &dims)?;
    // Broadcast labels of size 1 that the output wants larger (a lone operand's ellipsis).
    let mut perm = Vec::with_capacity(output.len());
    let mut t = result.t;
    for &l in &output {
        match result.labels.iter().position(|&m| m == l) {
            Some(p) => perm.push(p as i64),
            None => {
                t = t.unsqueeze(t.ndim() as i64)?;
                result.labels.push(l);
                perm.push(result.labels.len() as i64 - 1);
            }
        }
    }
    let t = t.permute(perm)?;
    let want: Vec<i64> = output.iter().map(|&l| size[l] as i64).collect();
    if t.shape().iter().zip(&want).any(|(&a, &b)| a as i64 != b) {
        return t.expand(want);
    }
    Ok(t)
}

fn sum_dims(x: &Labelled, dims: &[i64]) -> Result<Labelled> {
    if dims.is_empty() {
        return Ok(x.clone());
    }
    let labels = (0..x.labels.len())
        .filter(|d| !dims.contains(&(*d as i64)))
        .map(|d| x.labels[d])
        .collect();
    Ok(Labelled {
        t: x.t.sum_dim(dims, false)?,
        labels,
    })
}

/// Replaces each repeated label by one dim holding the diagonal.
fn take_diagonals(mut x: Labelled) -> Result<Labelled> {
    loop {
        let mut pair = None;
        'find: for q in 0..x.labels.len() {
            for p in 0..q {
                if x.labels[p] == x.labels[q] {
                    pair = Some((p, q));
                    break 'find;
                }
            }
        }
        let Some((p, q)) = pair else { return Ok(x) };
        // The diagonal view (PyTorch's `diagonal(0, p, q).movedim(-1, p)`):
        // only diagonal elements are read.
        x.t = x.t.diagonal(0, p as i64, q as i64)?.movedim([-1i64], [p as i64])?;
        x.labels.remove(q);
    }
}

/// The labels a set of operands keeps after contracting among themselves:
/// those also in the output or in an operand outside the set.
fn kept_labels(set: u32, labels: &[Vec<Label>], output: &[Label]) -> Vec<Label> {
    let mut inside: Vec<Label> = Vec::new();
    for (k, ls) in labels.iter().enumerate() {
        if set & (1 << k) != 0 {
            for &l in ls {
                if !inside.contains(&l) {
                    inside.push(l);
                }
            }
        }
    }
    inside
        .into_iter()
        .filter(|l| {
            output.contains(l)
                || labels
                    .iter()
                    .enumerate()
                    .any(|(k, ls)| set & (1 << k) == 0 && ls.contains(l))
        })
        .collect()
}

/// Contracts every operand: the pairwise order of least total flops
/// (dynamic programming over subsets; greedy past 10 operands).
fn contract_all(inputs: Vec<Labelled>, output: &[Label], size: &[usize]) -> Result<Labelled> {
    let n = inputs.len();
    let labels: Vec<Vec<Label>> = inputs.iter().map(|x| x.labels.clone()).collect();
    let flops = |a: &[Label], b: &[Label]| -> f64 {
        let mut all: Vec<Label> = a.to_vec();
        for &l in b {
            if !all.contains(&l) {
                all.push(l);
            }
        }
        all.iter().map(|&l| size[l] as f64).product()
    };
    if n <= 10 {
        let full = (1u32 << n) - 1;
        let mut cost = vec![f64::INFINITY; 1 << n];
        let mut split = vec![0u32; 1 << n];
        let mut kept: Vec<Vec<Label>> = vec![Vec::new(); 1 << n];
        for s in 1..=full {
            kept[s as usize] = kept_labels(s, &labels, output);
            if s.count_ones() == 1 {
                cost[s as usize] = 0.0;
            }
        }
        for s in 1..=full {
            if s.count_ones() < 2 {
                continue;
            }
            // Subsets containing the lowest bit (each split once).
            let low = s & s.wrapping_neg();
            let rest = s ^ low;
            let mut sub = rest;
            loop {
                let a = sub | low;
                let b = s ^ a;
                if b != 0 {
                    let c = cost[a as usize] + cost[b as usize] + flops(&kept[a as usize], &kept[b as usize]);
                    if c < cost[s as usize] {
                        cost[s as usize] = c;
                        split[s as usize] = a;
                    }
                }
                if sub == 0 {
                    break;
                }
                sub = (sub - 1) & rest;
            }
        }
        let mut slots: Vec<Option<Labelled>> = inputs.into_iter().map(Some).collect();
        return build(full, &split, &kept, &mut slots);
    }
    // Greedy: the cheapest pair first.
    let mut items: Vec<Labelled> = inputs;
    while items.len() > 1 {
        let mut best = (f64::INFINITY, 0, 1);
        for i in 0..items.len() {
            for j in i + 1..items.len() {
                let c = flops(&items[i].labels, &items[j].labels);
                if c < best.0 {
                    best = (c, i, j);
                }
            }
        }
        let (_, i, j) = best;
        let b = items.remove(j);
        let a = items.remove(i);
        let mut rest_labels: Vec<Label> = output.to_vec();
        for x in &items {
            rest_labels.extend(&x.labels);
        }
        let keep: Vec<Label> = a
            .labels
            .iter()
            .chain(&b.labels)
            .copied()
            .filter(|l| rest_labels.contains(l))
            .collect();
        items.push(contract_pair(a, b, &keep)?);
    }
    items.pop().ok_or_else(|| Error::invalid("einsum", "no operands"))
}

fn build(s: u32, split: &[u32], kept: &[Vec<Label>], slots: &mut [Option<Labelled>]) -> Result<Labelled> {
    if s.count_ones() == 1 {
        let k = s.trailing_zeros() as usize;
        return slots[k]
            .take()
            .ok_or_else(|| Error::invalid("einsum", "operand used twice"));
    }
    let a = split[s as usize];
    let x = build(a, split, kept, slots)?;
    let y = build(s ^ a, split, kept, slots)?;
    contract_pair(x, y, &kept[s as usize])
}

/// Contracts two operands over their shared labels not in `keep`, as one
/// batched GEMM: `[batch, left, k] @ [batch, k, right]`.
fn contract_pair(mut a: Labelled, mut b: Labelled, keep: &[Label]) -> Result<Labelled> {
    // Labels only in one operand and not kept: summed first.
    let lone = |x: &Labelled, y: &Labelled| -> Vec<i64> {
        (0..x.labels.len())
            .filter(|&d| !keep.contains(&x.labels[d]) && !y.labels.contains(&x.labels[d]))
            .map(|d| d as i64)
            .collect()
    };
    let da = lone(&a, &b);
    a = sum_dims(&a, &da)?;
    let db = lone(&b, &a);
    b = sum_dims(&b, &db)?;
    // Shared labels of size 1 on one side only: a contracted one is summed
    // on the other side first; a kept one is expanded.
    let shared: Vec<Label> = a.labels.iter().copied().filter(|l| b.labels.contains(l)).collect();
    for &l in &shared {
        let (sa, sb) = (size_of(&a, l).unwrap_or(1), size_of(&b, l).unwrap_or(1));
        if sa == sb {
            continue;
        }
        let (small, big) = if sa == 1 { (&mut a, &mut b) } else { (&mut b, &mut a) };
        let n = sa.max(sb);
        let p = small.labels.iter().position(|&m| m == l).unwrap_or(0);
        if keep.contains(&l) {
            let mut shape = small.t.shape_i64();
            shape[p] = n as i64;
            small.t = small.t.expand(shape)?;
        } else {
            let q = big.labels.iter().position(|&m| m == l).unwrap_or(0);
            big.t = big.t.sum_dim([q as i64], true)?;
        }
    }
    let batch: Vec<Label> = shared.iter().copied().filter(|l| keep.contains(l)).collect();
    let contracted: Vec<Label> = shared.iter().copied().filter(|l| !keep.contains(l)).collect();
    let (da, db) = (a.t.dtype(), b.t.dtype());
    if da != db {
        // PyTorch contracts summed labels with bmm (one dtype) and
        // multiplies the others elementwise (promoting).
        if contracted.iter().any(|&l| size_of(&a, l).unwrap_or(1) > 1) {
            return Err(Error::DTypeMismatch {
                op: "einsum",
                detail: format!(
                    "expected scalar type {} but found {}",
                    da.scalar_type_name(),
                    db.scalar_type_name()
                ),
            });
        }
        let dt = da.promote(db);
        a.t = a.t.to_dtype(dt)?;
        b.t = b.t.to_dtype(dt)?;
    }
    let left: Vec<Label> = a.labels.iter().copied().filter(|l| !shared.contains(l)).collect();
    let right: Vec<Label> = b.labels.iter().copied().filter(|l| !shared.contains(l)).collect();
    let pos = |x: &Labelled, ls: &[Label]| -> Vec<i64> {
        ls.iter()
            .map(|l| x.labels.iter().position(|m| m == l).unwrap_or(0) as i64)
            .collect()
    };
    let sz =
        |x: &Labelled, ls: &[Label]| -> Vec<i64> { ls.iter().map(|&l| size_of(x, l).unwrap_or(1) as i64).collect() };
    let bshape = sz(&a, &batch);
    let (lsz, ksz, rsz) = (sz(&a, &left), sz(&a, &contracted), sz(&b, &right));
    let (l, k, r) = (
        lsz.iter().product::<i64>(),
        ksz.iter().product::<i64>(),
        rsz.iter().product::<i64>(),
    );
    let mut pa = pos(&a, &batch);
    pa.extend(pos(&a, &left));
    pa.extend(pos(&a, &contracted));
    let mut pb = pos(&b, &batch);
    pb.extend(pos(&b, &contracted));
    pb.extend(pos(&b, &right));
    let mut sa = bshape.clone();
    sa.extend([l, k]);
    let mut sb = bshape.clone();
    sb.extend([k, r]);
    let ta = a.t.permute(pa)?.reshape(sa)?;
    let tb = b.t.permute(pb)?.reshape(sb)?;
    let prod = if bshape.is_empty() {
        ta.mm(&tb)?
    } else {
        crate::dispatch::call1(&crate::ops::linalg::MatMul, &[&ta, &tb])?
    };
    let mut shape = bshape;
    shape.extend(&lsz);
    shape.extend(&rsz);
    let mut labels = batch;
    labels.extend(left);
    labels.extend(right);
    Ok(Labelled {
        t: prod.reshape(shape)?,
        labels,
    })
}
