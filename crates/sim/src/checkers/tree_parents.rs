//! Property: after the switch settles, every vnode follows its primary parent again (secondary
//! parents are given up), and exactly one parent counts it as a working child.

use waymark_core::alter::AlterNode;

pub fn check(nodes: &[&AlterNode]) -> Vec<String> {
    let mut out = vec![];
    for n in nodes {
        if !n.follows_primary_parent() {
            out.push(format!("{} still follows {:?}, not its primary parent", n.id(), n.parent()));
        }
        let Some(_) = n.parent() else { continue };
        let parents = nodes.iter().filter(|p| p.working_children().contains(n.id())).count();
        if parents != 1 {
            out.push(format!("{} is a working child of {parents} parents", n.id()));
        }
    }
    out
}
