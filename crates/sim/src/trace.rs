//! The trace: a hash of every event the world handles, in order (same seed, same hash), and, when
//! asked, the events themselves as text.

use crate::hash::Fnv;
use crate::world::Event;
use std::hash::{Hash, Hasher};

pub struct Trace {
    hasher: Fnv,
    pub events: u64,
    print: bool,
}

impl Trace {
    pub fn new(print: bool) -> Self {
        Trace { hasher: Fnv::default(), events: 0, print }
    }

    pub fn event(&mut self, at_us: u64, event: &Event) {
        at_us.hash(&mut self.hasher);
        event.hash(&mut self.hasher);
        self.events += 1;
        if self.print {
            println!("{:>10}us {}", at_us, describe(event));
        }
    }

    pub fn hash(&self) -> u64 {
        self.hasher.finish()
    }
}

fn describe(event: &Event) -> String {
    match event {
        Event::Deliver { from, to, env, .. } => {
            format!("deliver {from}->{to} cut={:?} {:?}", env.cut.map(|c| c.0), env.body)
        }
        other => format!("{other:?}"),
    }
}
