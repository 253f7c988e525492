//! The CPU time this process and its waited-for children used (`INFO cpu`), from `getrusage`.

/// User and system seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTimes {
    pub user_s: f64,
    pub sys_s: f64,
}

/// This process's (`children: false`) or its children's CPU time; zero if the call fails.
pub fn cpu_times(children: bool) -> CpuTimes {
    let who = if children { libc::RUSAGE_CHILDREN } else { libc::RUSAGE_SELF };
    // SAFETY: `getrusage` only writes the struct it is given, which lives for the call.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return CpuTimes::default();
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    CpuTimes { user_s: seconds(usage.ru_utime), sys_s: seconds(usage.ru_stime) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_process_reports_user_time() {
        let begun = std::time::Instant::now();
        let mut x = 0u64;
        while begun.elapsed() < std::time::Duration::from_millis(30) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        assert!(x != 1);
        let t = cpu_times(false);
        assert!(t.user_s + t.sys_s > 0.0, "{t:?}");
    }
}
