//! The nemesis's network: one namespace per host on a bridge of its own, and the cut-offs it makes
//! by taking a host's link down. Everything is named after this run (`Tag`) and removed when the
//! `Net` is dropped — on success, on error and after Ctrl-C — and only what this run created.

use anyhow::{bail, Context, Result};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

/// Up to this many hosts: addresses .1 to .9 of the run's /24, the bridge at .254.
pub const HOSTS_MAX: usize = 9;

/// What makes this run's names and addresses its own: its process id.
#[derive(Clone, Copy, Debug)]
pub struct Tag(u32);

impl Tag {
    pub fn of_this_process() -> Tag {
        Tag(std::process::id())
    }

    /// The third octet of the run's 10.199.X.0/24, from its pid: two runs at once rarely share it,
    /// and a run refuses a subnet another holds (`Net::create`).
    fn octet(self) -> u8 {
        (self.0 % 250) as u8 + 1
    }

    fn bridge(self) -> String {
        format!("wmb{}", self.0)
    }

    /// A namespace's name (`ip netns`).
    pub fn namespace(self, host: usize) -> String {
        format!("wm{}h{}", self.0, host + 1)
    }

    /// The root side of a host's veth pair (at most 15 characters: `wmv` + pid + `h` + digit).
    fn veth_outside(self, host: usize) -> String {
        format!("wmv{}h{}", self.0, host + 1)
    }

    fn veth_inside(self, host: usize) -> String {
        format!("wmi{}h{}", self.0, host + 1)
    }
}

/// The namespaces and links of one run.
pub struct Net {
    tag: Tag,
    hosts: usize,
    /// What was created, in order, so `Drop` removes exactly that, last first.
    created: Vec<Created>,
}

#[derive(Debug)]
enum Created {
    Bridge(String),
    Namespace(String),
    Veth(String),
}

impl Net {
    /// A bridge in the root namespace at 10.199.X.254/24 and, per host, a namespace with its
    /// loopback up and a veth into the bridge at 10.199.X.(i+1). Needs root.
    pub fn create(tag: Tag, hosts: usize) -> Result<Net> {
        if !(1..=HOSTS_MAX).contains(&hosts) {
            bail!("--hosts must be in 1..={HOSTS_MAX} (got {hosts})");
        }
        if unsafe { libc::geteuid() } != 0 {
            bail!(
                "the nemesis needs root: it puts each host in a network namespace of its own (`ip netns`), \
                 which only root may create; run it with sudo"
            );
        }
        let subnet = format!("10.199.{}.", tag.octet());
        let routes = output(&["ip", "-4", "route", "show"])?;
        if routes.contains(&format!("{subnet}0/24")) {
            bail!("10.199.{}.0/24 is routed already (another nemesis run?): try again", tag.octet());
        }
        let mut net = Net { tag, hosts, created: vec![] };
        net.build(&subnet)?;
        Ok(net)
    }

    fn build(&mut self, subnet: &str) -> Result<()> {
        let bridge = self.tag.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        self.created.push(Created::Bridge(bridge.clone()));
        ip(&["addr", "add", &format!("{subnet}254/24"), "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        for h in 0..self.hosts {
            let (ns, outside, inside) = (self.tag.namespace(h), self.tag.veth_outside(h), self.tag.veth_inside(h));
            ip(&["netns", "add", &ns])?;
            self.created.push(Created::Namespace(ns.clone()));
            ip(&["link", "add", &outside, "type", "veth", "peer", "name", &inside])?;
            self.created.push(Created::Veth(outside.clone()));
            ip(&["link", "set", &inside, "netns", &ns])?;
            ip(&["link", "set", &outside, "master", &bridge])?;
            ip(&["link", "set", &outside, "up"])?;
            let addr = format!("{subnet}{}/24", h + 1);
            ip(&["netns", "exec", &ns, "ip", "addr", "add", &addr, "dev", &inside])?;
            ip(&["netns", "exec", &ns, "ip", "link", "set", &inside, "up"])?;
            ip(&["netns", "exec", &ns, "ip", "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    /// Host `h`'s address, reachable from the root namespace and from every other host.
    pub fn addr(&self, h: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 199, self.tag.octet(), h as u8 + 1)
    }

    pub fn namespace(&self, h: usize) -> String {
        self.tag.namespace(h)
    }

    /// Cuts host `h` off from every other host and from the clients (its link to the bridge down),
    /// or joins it again. Its process keeps running.
    pub fn set_cut_off(&self, h: usize, cut_off: bool) -> Result<()> {
        ip(&["link", "set", &self.tag.veth_outside(h), if cut_off { "down" } else { "up" }])
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for c in self.created.drain(..).rev() {
            let result = match &c {
                Created::Veth(v) => ip(&["link", "del", v]),
                Created::Namespace(ns) => ip(&["netns", "del", ns]),
                Created::Bridge(b) => ip(&["link", "del", b]),
            };
            if let Err(e) = result {
                eprintln!("nemesis: could not remove {c:?}: {e:#}");
            }
        }
    }
}

/// Runs `ip ARGS`, failing with its own words.
fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip").args(args).stdin(Stdio::null()).output().context("running `ip` (iproute2)")?;
    if !out.status.success() {
        bail!("`ip {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

fn output(words: &[&str]) -> Result<String> {
    let out = Command::new(words[0]).args(&words[1..]).output().with_context(|| format!("running {}", words[0]))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
