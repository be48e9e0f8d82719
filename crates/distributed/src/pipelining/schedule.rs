//! The order in which a rank runs its stages' forwards and backwards
//! (PyTorch's `schedules.py`): GPipe, 1F1B and interleaved 1F1B
//! (Megatron-LM's order, virtual stages placed round-robin).

/// One step of a rank's program: the forward or backward of microbatch
/// `mb` on its local stage number `local` (0 unless interleaved).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    Forward { local: usize, mb: usize },
    Backward { local: usize, mb: usize },
}

/// Which schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScheduleKind {
    /// Every forward, then every backward (`ScheduleGPipe`): microbatch
    /// activations of all microbatches held at once.
    GPipe,
    /// One forward, one backward after a warm-up (`Schedule1F1B`): at most
    /// `num_stages - stage` microbatches in flight per stage.
    OneFOneB,
    /// 1F1B over several stages per rank, stage `v * ranks + r` on rank
    /// `r` (`ScheduleInterleaved1F1B`): a smaller bubble. Needs the number
    /// of microbatches to be a multiple of the number of ranks.
    Interleaved1F1B,
}

/// The actions of rank `rank` of `ranks`, holding `local` stages, for
/// `m` microbatches.
pub(crate) fn actions(kind: ScheduleKind, rank: usize, ranks: usize, local: usize, m: usize) -> Vec<Action> {
    match kind {
        ScheduleKind::GPipe => (0..m)
            .map(|mb| Action::Forward { local: 0, mb })
            .chain((0..m).map(|mb| Action::Backward { local: 0, mb }))
            .collect(),
        ScheduleKind::OneFOneB => {
            let warmup = (ranks - rank - 1).min(m);
            let f = |mb| Action::Forward { local: 0, mb };
            let b = |mb| Action::Backward { local: 0, mb };
            let mut out: Vec<Action> = (0..warmup).map(f).collect();
            for i in 0..m - warmup {
                out.push(f(warmup + i));
                out.push(b(i));
            }
            out.extend((m - warmup..m).map(b));
            out
        }
        ScheduleKind::Interleaved1F1B => {
            let total = m * local;
            // The k-th forward (backward) of the rank: groups of `ranks`
            // microbatches go through each virtual stage in turn.
            let at = |k: usize, backward: bool| {
                let v = (k / ranks) % local;
                let mb = (k / (ranks * local)) * ranks + k % ranks;
                let local_stage = if backward { local - 1 - v } else { v };
                (local_stage, mb)
            };
            let f = |k| {
                let (local, mb) = at(k, false);
                Action::Forward { local, mb }
            };
            let b = |k| {
                let (local, mb) = at(k, true);
                Action::Backward { local, mb }
            };
            let warmup = ((ranks - rank - 1) * 2 + (local - 1) * ranks).min(total);
            let mut out: Vec<Action> = (0..warmup).map(f).collect();
            for i in 0..total - warmup {
                out.push(f(warmup + i));
                out.push(b(i));
            }
            out.extend((total - warmup..total).map(b));
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs every rank's program in lockstep with unbounded buffers: a
    /// forward waits for its input, a backward for its output's gradient;
    /// each program runs to its end (no deadlock) and every action once.
    fn simulate(kind: ScheduleKind, ranks: usize, local: usize, m: usize) {
        let stages = ranks * local;
        let programs: Vec<Vec<Action>> = (0..ranks).map(|r| actions(kind, r, ranks, local, m)).collect();
        let mut pc = vec![0; ranks];
        let mut fwd = vec![vec![false; m]; stages];
        let mut bwd = vec![vec![false; m]; stages];
        loop {
            let mut moved = false;
            for r in 0..ranks {
                let Some(&a) = programs[r].get(pc[r]) else { continue };
                let ready = match a {
                    Action::Forward { local: v, mb } => {
                        let s = v * ranks + r;
                        s == 0 || fwd[s - 1][mb]
                    }
                    Action::Backward { local: v, mb } => {
                        let s = v * ranks + r;
                        fwd[s][mb] && (s == stages - 1 || bwd[s + 1][mb])
                    }
                };
                if ready {
                    match a {
                        Action::Forward { local: v, mb } => fwd[v * ranks + r][mb] = true,
                        Action::Backward { local: v, mb } => bwd[v * ranks + r][mb] = true,
                    }
                    pc[r] += 1;
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
        for r in 0..ranks {
            assert_eq!(
                pc[r],
                programs[r].len(),
                "{kind:?} {ranks}x{local} m={m}: rank {r} stuck at {}",
                pc[r]
            );
            assert_eq!(programs[r].len(), 2 * m * local);
        }
        assert!(fwd.iter().chain(&bwd).all(|s| s.iter().all(|&d| d)));
    }

    #[test]
    fn every_schedule_runs_to_its_end() {
        for ranks in 1..=4 {
            for m in 1..=8 {
                simulate(ScheduleKind::GPipe, ranks, 1, m);
                simulate(ScheduleKind::OneFOneB, ranks, 1, m);
                for local in 1..=3 {
                    if m % ranks == 0 {
                        simulate(ScheduleKind::Interleaved1F1B, ranks, local, m);
                    }
                }
            }
        }
    }

    #[test]
    fn one_f_one_b_holds_few_microbatches() {
        // Stage 0 of 4 with 8 microbatches: 3 warm-up forwards, then
        // alternating.
        let a = actions(ScheduleKind::OneFOneB, 0, 4, 1, 8);
        let first: Vec<_> = a.iter().take(5).copied().collect();
        assert_eq!(
            first,
            [
                Action::Forward { local: 0, mb: 0 },
                Action::Forward { local: 0, mb: 1 },
                Action::Forward { local: 0, mb: 2 },
                Action::Forward { local: 0, mb: 3 },
                Action::Backward { local: 0, mb: 0 },
            ]
        );
    }
}
