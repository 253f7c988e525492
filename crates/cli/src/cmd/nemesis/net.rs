//! The nemesis's network: one namespace per host on a bridge of its own; the cut-offs it makes by
//! taking a host's link down, and the partitions and packet loss it makes with nftables rules
//! inside the namespaces (a table of its own, removed when the fault heals). Everything is named
//! after this run (`Tag`) and removed when the `Net` is dropped — on success, on error and after
//! Ctrl-C — and only what this run created (a namespace takes its rules with it).

use super::faults::Partition;
use anyhow::{bail, Context, Result};
use std::io::Write;
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

/// The nftables table a fault's rules live in, inside a host's namespace.
const TABLE: &str = "waymark_nemesis";

impl Net {
    /// Fails, saying how to get it, unless `nft` runs here.
    pub fn check_nftables() -> Result<()> {
        match Command::new("nft").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status() {
            Ok(s) if s.success() => Ok(()),
            _ => bail!(
                "the partition and loss faults need nftables (`nft`), which is not installed: \
                 `apt-get install nftables`, or leave them out of --faults"
            ),
        }
    }

    /// Applies `partition` (every receiver drops its senders' packets), or heals it.
    pub fn set_partition(&self, partition: &Partition, on: bool) -> Result<()> {
        let drops = partition.drops(self.hosts);
        let mut receivers: Vec<usize> = drops.iter().map(|(r, _)| *r).collect();
        receivers.sort_unstable();
        receivers.dedup();
        for r in receivers {
            if !on {
                self.remove_rules(r)?;
                continue;
            }
            let senders: Vec<String> =
                drops.iter().filter(|(x, _)| *x == r).map(|(_, s)| self.addr(*s).to_string()).collect();
            self.load_rules(r, &[("input", format!("ip saddr {{ {} }} drop", senders.join(", ")))])?;
        }
        Ok(())
    }

    /// Host `h` drops `percent` % of the packets it receives and of those it sends, or no more.
    pub fn set_loss(&self, h: usize, percent: u8, on: bool) -> Result<()> {
        if !on {
            return self.remove_rules(h);
        }
        let drop = format!("numgen random mod 100 < {percent} drop");
        self.load_rules(h, &[("input", drop.clone()), ("output", drop)])
    }

    /// Loads this run's table in host `h`'s namespace with one rule per (hook, rule) of `chains`
    /// (one fault at a time: the table is new).
    fn load_rules(&self, h: usize, chains: &[(&str, String)]) -> Result<()> {
        let mut script = format!("table inet {TABLE} {{\n");
        for (hook, rule) in chains {
            script += &format!(
                "  chain {hook} {{\n    type filter hook {hook} priority 0; policy accept;\n    {rule}\n  }}\n"
            );
        }
        script += "}\n";
        let ns = self.tag.namespace(h);
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns, "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("running `nft` in a namespace")?;
        child.stdin.take().context("nft's stdin")?.write_all(script.as_bytes())?;
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!("nft in {ns} refused `{script}`: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(())
    }

    fn remove_rules(&self, h: usize) -> Result<()> {
        ip(&["netns", "exec", &self.tag.namespace(h), "nft", "delete", "table", "inet", TABLE])
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
