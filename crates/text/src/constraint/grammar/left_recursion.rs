//! Left recursion: a rule that can reach itself without reading a byte. Where each step of
//! that loop is in tail position (`R ::= x R | ε` with `x` able to be empty, or `a ::= b`,
//! `b ::= a | "x"`) the stack never grows, and the recognizer's expansion stops at a stack it
//! has seen; where some step leaves a continuation behind (`expr ::= expr "+" term`) every
//! round deepens the stack without end, and the grammar is refused.

use super::compile::Elem;

/// The first rule found on a left-recursive loop that deepens the stack, if any.
pub(super) fn growing_loop(rules: &[Vec<Vec<Elem>>]) -> Option<u32> {
    let nullable = nullable(rules);
    // Edges to the rules each rule may begin with, and whether the step leaves a
    // continuation on the stack (the reference is not its alternative's last element).
    let mut edges: Vec<Vec<(u32, bool)>> = vec![Vec::new(); rules.len()];
    for (id, alts) in rules.iter().enumerate() {
        for alt in alts {
            for (i, e) in alt.iter().enumerate() {
                let Elem::Rule(r) = *e else { break };
                edges[id].push((r, i + 1 < alt.len()));
                if !nullable[r as usize] {
                    break;
                }
            }
        }
    }
    let component = components(&edges);
    edges.iter().enumerate().find_map(|(from, out)| {
        out.iter()
            .find(|&&(to, grows)| grows && component[from] == component[to as usize])
            .map(|&(to, _)| to)
    })
}

/// Which rules can match the empty string.
fn nullable(rules: &[Vec<Vec<Elem>>]) -> Vec<bool> {
    let mut nullable = vec![false; rules.len()];
    loop {
        let mut changed = false;
        for (id, alts) in rules.iter().enumerate() {
            let empty = |alt: &Vec<Elem>| {
                alt.iter()
                    .all(|e| matches!(e, Elem::Rule(r) if nullable[*r as usize]))
            };
            if !nullable[id] && alts.iter().any(empty) {
                nullable[id] = true;
                changed = true;
            }
        }
        if !changed {
            return nullable;
        }
    }
}

/// Strongly connected components (Tarjan's, without recursion): a component id per node.
fn components(edges: &[Vec<(u32, bool)>]) -> Vec<u32> {
    const NONE: u32 = u32::MAX;
    let n = edges.len();
    let (mut index, mut low, mut component) = (vec![NONE; n], vec![0u32; n], vec![NONE; n]);
    let (mut on_stack, mut stack) = (vec![false; n], Vec::new());
    let (mut next_index, mut next_component) = (0u32, 0u32);
    for root in 0..n {
        if index[root] != NONE {
            continue;
        }
        let mut calls = vec![(root, 0usize)];
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut i)) = calls.last_mut() {
            if let Some(&(w, _)) = edges[v].get(*i) {
                *i += 1;
                let w = w as usize;
                if index[w] == NONE {
                    index[w] = next_index;
                    low[w] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    calls.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component[w] = next_component;
                    if w == v {
                        break;
                    }
                }
                next_component += 1;
            }
        }
    }
    component
}
