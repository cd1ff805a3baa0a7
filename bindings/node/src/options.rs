//! The keys of a plain-JavaScript options object, checked against the
//! option names of the call: an unknown key (a typo such as `{ lease: 5 }`
//! for `leaseDuration`) is refused, naming it and the nearest known name
//! (the shared crate's [`nearest`]), instead of running with a default.

use krabka_coordination_bindings::suggest::nearest;
use napi::bindgen_prelude::{Object, Unknown};
use napi::{Env, ValueType};
use napi_derive::napi;

use crate::error::invalid_napi;

/// Throws an `InvalidArgumentError` (`field`: the key) for the first own
/// enumerable key of `options` that is not in `known`; `call` names the
/// call in the message (`acquireLeadership`). Anything but an object is
/// left to the caller's type check.
#[napi(js_name = "_checkOptionKeys", skip_typescript)]
pub fn check_option_keys(
    env: Env,
    options: Unknown<'_>,
    known: Vec<String>,
    call: String,
) -> napi::Result<()> {
    if options.get_type()? != ValueType::Object {
        return Ok(());
    }
    // SAFETY: an object value of this env.
    let obj = unsafe { options.cast::<Object<'_>>() }?;
    for key in Object::keys(&obj)? {
        if known.contains(&key) {
            continue;
        }
        let names: Vec<&str> = known.iter().map(String::as_str).collect();
        return Err(invalid_napi(
            &env,
            &key,
            unknown_option(&key, &names, &call),
        ));
    }
    Ok(())
}

/// The message of an unknown option: the nearest known one when one is
/// near enough, else every known one.
fn unknown_option(key: &str, known: &[&str], call: &str) -> String {
    match nearest(key, known) {
        Some(near) => format!("unknown option {key:?} of {call}(): did you mean {near:?}?"),
        None => format!(
            "unknown option {key:?} of {call}(): its options are {}",
            known.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::unknown_option;

    #[test]
    fn a_typo_names_the_nearest_option_and_anything_else_lists_them() {
        let known = ["leaseDuration", "renewInterval", "signal"];
        assert_eq!(
            unknown_option("renew_interval", &known, "lead"),
            "unknown option \"renew_interval\" of lead(): did you mean \"renewInterval\"?"
        );
        assert_eq!(
            unknown_option("lease", &known, "acquireLeadership"),
            "unknown option \"lease\" of acquireLeadership(): its options are leaseDuration, renewInterval, signal"
        );
    }
}
