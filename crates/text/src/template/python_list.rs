//! Lists a chat template mutates, as Python's Jinja lets it: Kimi K2's templates keep a queue of
//! tool-call ids in a namespace (`namespace(ids=[])`), `append` to it for each call and
//! `pop(0)` for each tool result. minijinja's values are immutable, so [`namespace`] gives every
//! list it is handed as a default a [`PythonList`], which reads like any list (index, iterate,
//! length, truth, concatenation, `tojson`) and takes `append`, `extend`, `insert`, `pop`,
//! `remove` and `clear` in place.

use std::sync::{Arc, Mutex};

use minijinja::value::{Enumerator, Object, ObjectRepr, Value, ValueKind};
use minijinja::{Error, ErrorKind, State};

/// A list with interior mutability.
#[derive(Debug, Default)]
pub struct PythonList(Mutex<Vec<Value>>);

impl PythonList {
    fn items(&self) -> std::sync::MutexGuard<'_, Vec<Value>> {
        // A panic while the lock was held cannot leave the vector half-changed (each method
        // is one Vec operation), so a poisoned lock is still a usable list.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// `index` of a list of `len` items as Python reads it (negative from the end).
fn position(index: &Value, len: usize) -> Option<usize> {
    let i = i64::try_from(index.clone()).ok()?;
    let i = if i < 0 { i + len as i64 } else { i };
    usize::try_from(i).ok().filter(|&i| i < len)
}

fn invalid(message: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, message)
}

impl Object for PythonList {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let items = self.items();
        position(key, items.len()).map(|i| items[i].clone())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.items().len())
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        let mut items = self.items();
        let arity = |n: std::ops::RangeInclusive<usize>| match n.contains(&args.len()) {
            true => Ok(()),
            false => Err(invalid(format!(
                "list.{method}() takes {n:?} arguments, got {}",
                args.len()
            ))),
        };
        match method {
            "append" => {
                arity(1..=1)?;
                items.push(args[0].clone());
                Ok(Value::from(()))
            }
            "extend" => {
                arity(1..=1)?;
                items.extend(args[0].try_iter()?);
                Ok(Value::from(()))
            }
            "insert" => {
                arity(2..=2)?;
                let len = items.len() as i64;
                let i = i64::try_from(args[0].clone())?;
                let i = if i < 0 { (i + len).max(0) } else { i.min(len) };
                items.insert(i as usize, args[1].clone());
                Ok(Value::from(()))
            }
            "pop" => {
                arity(0..=1)?;
                let len = items.len();
                let at = match args.first() {
                    None if len > 0 => len - 1,
                    None => return Err(invalid("pop from empty list".into())),
                    Some(index) => position(index, len)
                        .ok_or_else(|| invalid("pop index out of range".into()))?,
                };
                Ok(items.remove(at))
            }
            "remove" => {
                arity(1..=1)?;
                let at = (items.iter().position(|v| v == &args[0]))
                    .ok_or_else(|| invalid("list.remove(x): x not in list".into()))?;
                items.remove(at);
                Ok(Value::from(()))
            }
            "clear" => {
                arity(0..=0)?;
                items.clear();
                Ok(Value::from(()))
            }
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }
}

/// Jinja's `namespace(...)`, whose list defaults become [`PythonList`]s.
pub fn namespace(defaults: Option<Value>) -> Result<Value, Error> {
    let mutable = |value: Value| -> Result<Value, Error> {
        match value.kind() {
            ValueKind::Seq if value.downcast_object_ref::<PythonList>().is_none() => {
                let list = value.try_iter()?.collect();
                Ok(Value::from_object(PythonList(Mutex::new(list))))
            }
            _ => Ok(value),
        }
    };
    let defaults = match defaults {
        Some(map) if map.kind() == ValueKind::Map => {
            let pairs = map
                .try_iter()?
                .map(|key| {
                    let value = map.get_item(&key)?;
                    Ok((key, mutable(value)?))
                })
                .collect::<Result<Vec<_>, Error>>()?;
            Some(Value::from_iter(pairs))
        }
        other => other,
    };
    minijinja::functions::namespace(defaults)
}
