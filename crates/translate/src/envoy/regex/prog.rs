//! The program, after `re2/prog.cc`: `Prog::Optimize` (Nop chains skipped;
//! an `Alt` between a `.*` loop and a match marked `AltMatch`) and
//! `Prog::Flatten`, only what decides the size. [`flattened_size`] is the
//! number Envoy compares with its limit: one list per root, each holding
//! the non-`Alt` instructions reachable from it by empty transitions, and a
//! Nop for each other root reached.

use std::collections::HashMap;

use super::compile::{Inst, InstOp};

/// An insertion-ordered set of instruction ids.
struct Workq {
    seen: Vec<bool>,
    order: Vec<u32>,
}

impl Workq {
    fn new(n: usize) -> Workq {
        Workq {
            seen: vec![false; n],
            order: Vec::new(),
        }
    }
    fn add(&mut self, id: u32) {
        if id != 0 && !self.seen[id as usize] {
            self.seen[id as usize] = true;
            self.order.push(id);
        }
    }
}

fn is_match(prog: &[Inst], mut id: u32) -> bool {
    for _ in 0..prog.len() {
        let ip = prog[id as usize];
        match ip.op {
            InstOp::Capture | InstOp::Nop => id = ip.out,
            InstOp::Match => return true,
            _ => return false,
        }
    }
    false
}

/// Follows `id` past Nop instructions.
fn skip_nops(prog: &[Inst], mut j: u32) -> u32 {
    for _ in 0..prog.len() {
        if j == 0 || prog[j as usize].op != InstOp::Nop {
            break;
        }
        j = prog[j as usize].out;
    }
    j
}

pub(super) fn optimize(prog: &mut [Inst], start: u32) {
    // Skip nops.
    let mut q = Workq::new(prog.len());
    q.add(start);
    let mut i = 0;
    while i < q.order.len() {
        let id = q.order[i] as usize;
        i += 1;
        let j = skip_nops(prog, prog[id].out);
        prog[id].out = j;
        q.add(j);
        if prog[id].op == InstOp::Alt {
            let j = skip_nops(prog, prog[id].out1);
            prog[id].out1 = j;
            q.add(j);
        }
    }
    // Alt with a .* loop on one side and a match on the other: AltMatch.
    let mut q = Workq::new(prog.len());
    q.add(start);
    let mut i = 0;
    while i < q.order.len() {
        let id = q.order[i];
        i += 1;
        let ip = prog[id as usize];
        q.add(ip.out);
        if ip.op == InstOp::Alt {
            q.add(ip.out1);
            let (j, k) = (prog[ip.out as usize], prog[ip.out1 as usize]);
            let any_loop = |x: Inst| x.op == InstOp::ByteRange && x.out == id && x.lo == 0x00 && x.hi == 0xFF;
            if (any_loop(j) && is_match(prog, ip.out1)) || (is_match(prog, ip.out) && any_loop(k)) {
                prog[id as usize].op = InstOp::AltMatch;
            }
        }
    }
}

/// A set of instruction ids that clears in O(1) and iterates in insertion
/// order.
struct Marks {
    stamp: Vec<u32>,
    epoch: u32,
    order: Vec<u32>,
}

impl Marks {
    fn new(n: usize) -> Marks {
        Marks {
            stamp: vec![0; n],
            epoch: 1,
            order: Vec::new(),
        }
    }
    fn clear(&mut self) {
        self.epoch += 1;
        self.order.clear();
    }
    pub(super) fn contains(&self, id: u32) -> bool {
        self.stamp[id as usize] == self.epoch
    }
    fn insert(&mut self, id: u32) {
        self.stamp[id as usize] = self.epoch;
        self.order.push(id);
    }
}

/// The number of instructions of the flattened program: one list per
/// "root", each holding the non-Alt instructions reachable from it by empty
/// transitions, and a Nop for each other root reached.
pub(super) fn flattened_size(prog: &[Inst], start: u32, start_unanchored: u32) -> usize {
    let n = prog.len();
    let mut is_root = vec![false; n];
    let mut roots: Vec<u32> = Vec::new();
    fn mark_root(id: u32, is_root: &mut [bool], roots: &mut Vec<u32>) {
        if let Some(r) = is_root.get_mut(id as usize)
            && !*r
        {
            *r = true;
            roots.push(id);
        }
    }
    mark_root(0, &mut is_root, &mut roots);
    mark_root(start_unanchored, &mut is_root, &mut roots);
    mark_root(start, &mut is_root, &mut roots);

    // Successor roots and predecessors.
    let mut preds: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut reachable = Marks::new(n);
    let mut stk = vec![start_unanchored];
    while let Some(mut id) = stk.pop() {
        loop {
            if reachable.contains(id) {
                break;
            }
            reachable.insert(id);
            let ip = prog[id as usize];
            match ip.op {
                InstOp::Alt | InstOp::AltMatch => {
                    for out in [ip.out, ip.out1] {
                        preds.entry(out).or_default().push(id);
                    }
                    stk.push(ip.out1);
                    id = ip.out;
                }
                InstOp::ByteRange | InstOp::Capture | InstOp::EmptyWidth => {
                    mark_root(ip.out, &mut is_root, &mut roots);
                    id = ip.out;
                }
                InstOp::Nop => id = ip.out,
                InstOp::Match | InstOp::Fail => break,
            }
        }
    }

    // Dominator roots, from the highest successor root down.
    let mut sorted = roots.clone();
    sorted.sort_unstable();
    for &root in sorted.iter().skip(1).rev() {
        if root == start_unanchored || root == start {
            continue;
        }
        reachable.clear();
        let mut stk = vec![root];
        while let Some(mut id) = stk.pop() {
            loop {
                if reachable.contains(id) {
                    break;
                }
                reachable.insert(id);
                if id != root && is_root[id as usize] {
                    break;
                }
                let ip = prog[id as usize];
                match ip.op {
                    InstOp::Alt | InstOp::AltMatch => {
                        stk.push(ip.out1);
                        id = ip.out;
                    }
                    InstOp::Nop => id = ip.out,
                    _ => break,
                }
            }
        }
        let order = reachable.order.clone();
        for id in order {
            if let Some(ps) = preds.get(&id)
                && ps.iter().any(|&p| !reachable.contains(p))
            {
                mark_root(id, &mut is_root, &mut roots);
            }
        }
    }

    // Emit (count) the lists.
    let mut size = 0;
    for &root in &roots {
        reachable.clear();
        let mut stk = vec![root];
        while let Some(mut id) = stk.pop() {
            loop {
                if reachable.contains(id) {
                    break;
                }
                reachable.insert(id);
                if id != root && is_root[id as usize] {
                    size += 1; // Nop to the other list
                    break;
                }
                let ip = prog[id as usize];
                match ip.op {
                    InstOp::AltMatch | InstOp::Alt => {
                        if ip.op == InstOp::AltMatch {
                            size += 1;
                        }
                        stk.push(ip.out1);
                        id = ip.out;
                    }
                    InstOp::Nop => id = ip.out,
                    InstOp::ByteRange
                    | InstOp::Capture
                    | InstOp::EmptyWidth
                    | InstOp::Match
                    | InstOp::Fail => {
                        size += 1;
                        break;
                    }
                }
            }
        }
    }
    size
}
