//! The cut thread of a run: one consistent cut of the whole cluster (`POST /cuts`) every
//! `every`, from the start of the measured window to its end, never two at once (a tick missed
//! while a cut runs is skipped). Each cut's round trip and the phases the manager reports are kept.

use super::stats::Cut;
use crate::cmd::admin_client::Admin;
use serde::Deserialize;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long one cut may take before it counts as failed.
const CUT_TIMEOUT: Duration = Duration::from_secs(30);

/// `POST /cuts`' answer.
#[derive(Deserialize)]
struct CutAnswer {
    cut: u64,
    ok: bool,
    phases_ms: Vec<f64>,
    /// Why it failed, when it did.
    #[serde(default)]
    why: Option<String>,
}

/// Runs cuts from `from` until `end`; gives back the admin client and the cuts.
pub fn spawn(mut admin: Admin, every: Duration, from: Instant, end: Instant) -> JoinHandle<(Admin, Vec<Cut>)> {
    std::thread::spawn(move || {
        let mut cuts = vec![];
        let mut tick = from;
        while tick < end {
            if let Some(wait) = tick.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            cuts.push(one(&mut admin, from));
            // The next tick still ahead: ticks missed while this cut ran are skipped.
            let now = Instant::now();
            while tick <= now {
                tick += every;
            }
        }
        (admin, cuts)
    })
}

fn one(admin: &mut Admin, from: Instant) -> Cut {
    let asked = Instant::now();
    let answer = admin.post_sticky::<_, CutAnswer>("/cuts", &serde_json::json!({}), CUT_TIMEOUT);
    let latency_ms = asked.elapsed().as_secs_f64() * 1000.0;
    let at_s = asked.saturating_duration_since(from).as_secs_f64();
    match answer {
        Ok(a) => Cut {
            at_s,
            latency_ms,
            cut: Some(a.cut),
            ok: a.ok,
            phases_ms: a.phases_ms,
            error: (!a.ok).then(|| {
                format!("the cluster reports the cut failed: {}", a.why.as_deref().unwrap_or("no reason given"))
            }),
        },
        Err(e) => Cut { at_s, latency_ms, cut: None, ok: false, phases_ms: vec![], error: Some(format!("{e:#}")) },
    }
}
