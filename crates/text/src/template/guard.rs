//! The rewrite of a compiled chat template that lets the render budget see what minijinja has no
//! hook for: `~` becomes a call to a capped concatenation, `+` and `*` a size check whose result
//! is unpacked back onto the stack for the original instruction, and raw text an emitted
//! constant, so it passes the formatter, which counts it. Jump targets are moved with the
//! instructions. The checks themselves are `budget.rs`'s.

use minijinja::machinery::{Instruction, Instructions};
use minijinja::value::Value;

/// Names of the functions the rewritten instructions call.
pub(super) const CONCAT: &str = "__sluice_concat";
pub(super) const CHECK_ADD: &str = "__sluice_check_add";
pub(super) const CHECK_MUL: &str = "__sluice_check_mul";

/// A copy of `source` in which `~` is [`concat`](super::budget::concat), `+` and `*` are
/// checked by [`check_add`](super::budget::check_add) and
/// [`check_mul`](super::budget::check_mul) first, and raw text is emitted as a constant (so
/// the formatter counts it).
pub(super) fn guard_instructions<'s>(source: &Instructions<'s>) -> Instructions<'s> {
    fn width(instruction: &Instruction<'_>) -> u32 {
        match instruction {
            Instruction::EmitRaw(_) => 2,
            Instruction::Add | Instruction::Mul => 3,
            _ => 1,
        }
    }
    let len = source.len() as u32;
    let instr = |i: u32| source.get(i).expect("index below len");
    // new_index[i]: where old instruction i starts in the copy; new_index[len]: the end.
    let mut new_index = Vec::with_capacity(len as usize + 1);
    let mut at = 0u32;
    for i in 0..len {
        new_index.push(at);
        at += width(instr(i));
    }
    new_index.push(at);
    let target = |t: u32| new_index.get(t as usize).copied().unwrap_or(at);

    let mut out = Instructions::new(source.name(), source.source());
    for i in 0..len {
        let span = source.get_span(i);
        let line = source.get_line(i);
        let mut push = |instruction: Instruction<'s>| match (span, line) {
            (Some(span), _) => out.add_with_span(instruction, span),
            (None, Some(line)) => out.add_with_line(instruction, line as u16),
            (None, None) => out.add(instruction),
        };
        match instr(i).clone() {
            Instruction::EmitRaw(text) => {
                push(Instruction::LoadConst(Value::from_safe_string(text.into())));
                push(Instruction::Emit);
            }
            Instruction::StringConcat => {
                push(Instruction::CallFunction(CONCAT, Some(2)));
            }
            op @ (Instruction::Add | Instruction::Mul) => {
                let check = match op {
                    Instruction::Add => CHECK_ADD,
                    _ => CHECK_MUL,
                };
                push(Instruction::CallFunction(check, Some(2)));
                push(Instruction::UnpackList(2));
                push(op);
            }
            Instruction::Iterate(t) => {
                push(Instruction::Iterate(target(t)));
            }
            Instruction::Jump(t) => {
                push(Instruction::Jump(target(t)));
            }
            Instruction::JumpIfFalse(t) => {
                push(Instruction::JumpIfFalse(target(t)));
            }
            Instruction::JumpIfFalseOrPop(t) => {
                push(Instruction::JumpIfFalseOrPop(target(t)));
            }
            Instruction::JumpIfTrueOrPop(t) => {
                push(Instruction::JumpIfTrueOrPop(target(t)));
            }
            Instruction::BuildMacro(name, t, flags) => {
                push(Instruction::BuildMacro(name, target(t), flags));
            }
            other => {
                push(other);
            }
        }
    }
    out
}
