//! The bounded configurations the tests check, and their larger versions
//! for `ci/model.sh`. Each scenario opens the faults its properties need and
//! no others, so the state space stays small enough to explore completely.

use crate::config::{member, Config, Faults, Proposed};

/// Crashes and restarts of three members of one role, a guarded write and a
/// small epoch space: failover, the crash liveness, the dead roster,
/// ordered writes, epoch exhaustion.
pub fn crashes() -> Config {
    Config {
        members: vec![member("a", 0, 0), member("b", 0, 0), member("c", 0, 0)],
        faults: Faults {
            crash: true,
            ..Faults::default()
        },
        max_faults: 2,
        max_restarts: 1,
        max_epoch: 1,
        horizon: 9,
        liveness_window: 6,
        ..Config::base()
    }
}

/// A leader paused or cut off, a standby whose clock runs one tick ahead, a
/// resign and guarded writes: deposed leaders, zombie writes, resign
/// hand-overs, the local deadline.
pub fn deposed() -> Config {
    Config {
        members: vec![member("a", 0, 0), member("b", 0, 1)],
        faults: Faults {
            pause: true,
            disconnect: true,
            ..Faults::default()
        },
        max_faults: 1,
        max_resigns: 1,
        max_writes: 1,
        horizon: 8,
        ..Config::base()
    }
}

/// Equal clocks, a leader cut off or paused, a resign and a guarded write:
/// the local deadline and overlapping windows.
pub fn cut_off() -> Config {
    Config {
        members: vec![member("a", 0, 0), member("b", 0, 0)],
        faults: Faults {
            pause: true,
            disconnect: true,
            ..Faults::default()
        },
        max_faults: 1,
        max_resigns: 1,
        max_writes: 1,
        horizon: 8,
        ..Config::base()
    }
}

/// Two roles on the one partition: the leader of role `x` (not modelled as
/// a member) freezes mid-renewal and holds the last stable offset back
/// while role `r`'s leader and standby run on time.
pub fn neighbour() -> Config {
    Config {
        roles: vec!["r".into(), "x".into()],
        members: vec![member("a", 0, 0), member("b", 0, 0)],
        faults: Faults {
            neighbour: true,
            ..Faults::default()
        },
        max_faults: 1,
        faults_anywhere: true,
        horizon: 8,
        ..Config::base()
    }
}

/// Two processes under one member id beside a third member: the
/// duplicate-member-id check.
pub fn twins() -> Config {
    Config {
        members: vec![member("a", 0, 0), member("a", 0, 0), member("b", 0, 0)],
        horizon: 5,
        ..Config::base()
    }
}

/// A holder's wall clock steps far ahead and the holder crashes: standbys
/// cap their wait instead of trusting the far-future deadline.
pub fn clock_steps() -> Config {
    Config {
        members: vec![member("a", 0, 0), member("b", 0, 0)],
        faults: Faults {
            crash: true,
            clock_step: 4,
            ..Faults::default()
        },
        max_faults: 2,
        horizon: 9,
        ..Config::base()
    }
}

/// Every bounded scenario, by name.
pub fn all() -> Vec<(&'static str, Config)> {
    vec![
        ("crashes", crashes()),
        ("deposed", deposed()),
        ("cut_off", cut_off()),
        ("neighbour", neighbour()),
        ("twins", twins()),
        ("clock_steps", clock_steps()),
    ]
}

/// The properties the checker refutes in `config` (scenario `name`): none
/// with the core's behaviour (the default), at any size. With
/// `held_back_at_read_position` switched off (the held-back check and a
/// read after it, two requests), from two
/// neighbour stalls on (size 2) a challenger fences a leader elected in the
/// same instant.
pub fn current_findings(name: &str, config: &Config) -> Vec<&'static str> {
    use crate::properties::{HEALTHY_LEADER_KEPT, NO_OVERLAPPING_WINDOWS};
    let p = config.proposed;
    let two_requests = p.read_after_held_back && !p.held_back_at_read_position;
    let two_stalls = config.faults.neighbour && config.faults_anywhere && config.max_faults >= 2;
    if name == "neighbour" && two_requests && two_stalls && config.old == Default::default() {
        vec![HEALTHY_LEADER_KEPT, NO_OVERLAPPING_WINDOWS]
    } else {
        Vec::new()
    }
}

/// `config` with every proposed fix of a finding switched on.
pub fn with_proposed_fixes(mut config: Config) -> Config {
    config.proposed = Proposed {
        read_after_held_back: true,
        held_back_without_lease: true,
        resign_ends_at_deadline: true,
        held_back_at_read_position: true,
        look_past_stable: true,
    };
    config
}

/// `config` made larger by `size` (0 is the bounded check): each size adds
/// two ticks of horizon; size 2 and more add a fault to the budget, size 3
/// and more let faults strike between any two steps of an instant.
pub fn scaled(mut config: Config, size: u8) -> Config {
    config.horizon = config.horizon.saturating_add(2 * size);
    if size >= 2 {
        config.max_faults = config.max_faults.saturating_add(1);
    }
    if size >= 3 {
        config.faults_anywhere = true;
    }
    config
}
