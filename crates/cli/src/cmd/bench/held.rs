//! Replies held for real-time safety during a run: read from every host's `GET /metrics`
//! (`waymark_held_reply_seconds`, a histogram each store vnode feeds as it releases a reply) before
//! and after the run. With closed-loop clients a held reply is a client waiting, so this is where a
//! consistent cut's cost to clients shows.

use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

const HELD_COUNT: &str = "waymark_held_reply_seconds_count";
const HELD_SUM: &str = "waymark_held_reply_seconds_sum";
/// One scrape of one host.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// The held-reply counters of a whole cluster at one moment (summed over its hosts).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HeldTotals {
    pub count: u64,
    pub sum_s: f64,
}

/// What a run held, from the counters before and after it.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct HeldReplies {
    pub count: u64,
    pub mean_ms: f64,
}

impl HeldReplies {
    pub fn between(before: HeldTotals, after: HeldTotals) -> HeldReplies {
        let count = after.count.saturating_sub(before.count);
        let sum_ms = (after.sum_s - before.sum_s).max(0.0) * 1000.0;
        HeldReplies { count, mean_ms: if count == 0 { 0.0 } else { sum_ms / count as f64 } }
    }
}

/// Sums the counters of every host; `None` if any host cannot be read (the run then reports no
/// held replies rather than a partial figure). Over HTTPS with `tls` when the cluster has TLS.
pub fn scrape(admin_addrs: &[String], tls: Option<Arc<rustls::ClientConfig>>) -> Option<HeldTotals> {
    let http = waymark_server::tls::AdminHttp::new(tls, SCRAPE_TIMEOUT);
    let mut total = HeldTotals::default();
    for addr in admin_addrs {
        let url = http.url(addr.parse().ok()?, "/metrics");
        let text = http.agent.get(&url).call().ok()?.into_string().ok()?;
        let host = parse(&text);
        total.count += host.count;
        total.sum_s += host.sum_s;
    }
    Some(total)
}

/// The held-reply counters in one Prometheus text page; absent lines are zero (no reply was held
/// since the process started).
fn parse(text: &str) -> HeldTotals {
    let value = |name: &str| {
        text.lines()
            .filter_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .filter_map(|v| v.trim().parse::<f64>().ok())
            .sum::<f64>()
    };
    HeldTotals { count: value(HELD_COUNT) as u64, sum_s: value(HELD_SUM) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counters_are_read_from_prometheus_text_and_a_run_is_their_difference() {
        let page = "# TYPE waymark_held_reply_seconds histogram\n\
                    waymark_held_reply_seconds_bucket{le=\"0.001\"} 3\n\
                    waymark_held_reply_seconds_sum 0.012\n\
                    waymark_held_reply_seconds_count 4\n\
                    waymark_held_reply_seconds_counter_other 9\n";
        let after = parse(page);
        assert_eq!(after, HeldTotals { count: 4, sum_s: 0.012 });
        let run = HeldReplies::between(HeldTotals { count: 1, sum_s: 0.002 }, after);
        assert_eq!(run.count, 3);
        assert!((run.mean_ms - 10.0 / 3.0).abs() < 1e-9, "{run:?}");
        assert_eq!(parse("").count, 0, "no reply held yet: no lines");
    }
}
