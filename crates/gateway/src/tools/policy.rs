//! Which tools a person may use, by role, from the gateway config's `[policy.ROLE]`
//! tables. A role without a table is unrestricted; `[policy."*"]` applies to callers
//! with no role at all (e.g. client-credentials callers). With several
//! roles, the most permissive wins: a tool is refused only if every one refuses it.

use std::collections::BTreeMap;

use super::catalogue::RegisteredTool;
use maitred_core::settings::gateway_file::RolePolicy;
use maitred_core::settings::mcp_servers::wildcard as matches;

#[derive(Debug, Clone, Default)]
pub struct ToolPolicy {
    roles: BTreeMap<String, RolePolicy>,
}

/// The policies that apply to one person; empty means unrestricted.
#[derive(Debug, Clone)]
pub struct Effective<'a> {
    policies: Vec<&'a RolePolicy>,
}

impl ToolPolicy {
    pub fn new(roles: BTreeMap<String, RolePolicy>) -> Self {
        let roles = roles
            .into_iter()
            .map(|(role, policy)| (role.to_ascii_uppercase(), policy))
            .collect();
        Self { roles }
    }

    pub fn for_roles(&self, roles: &[String]) -> Effective<'_> {
        let mut policies: Vec<&RolePolicy> = Vec::new();
        let mut unrestricted = false;
        for role in roles {
            match self.roles.get(&role.to_ascii_uppercase()) {
                Some(policy) => policies.push(policy),
                None => unrestricted = true,
            }
        }
        if unrestricted {
            policies.clear();
        } else if roles.is_empty() {
            policies.extend(self.roles.get("*"));
        }
        Effective { policies }
    }
}

/// Why a person's roles refuse a tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("your role may not use tools that change data")]
    WriteTools,
    #[error("your role may not use {tool} (policy {pattern:?})")]
    Denied { tool: String, pattern: String },
}

impl Effective<'_> {
    pub fn check(&self, tool: &RegisteredTool) -> Result<(), Refused> {
        let mut refused = None;
        for policy in &self.policies {
            if !tool.read_only && !policy.write_tools {
                refused = Some(Refused::WriteTools);
            } else if let Some(pattern) = policy.deny.iter().find(|p| matches(p, &tool.exposed)) {
                refused = Some(Refused::Denied {
                    tool: tool.exposed.clone(),
                    pattern: pattern.clone(),
                });
            } else {
                return Ok(());
            }
        }
        refused.map_or(Ok(()), Err)
    }

    pub fn allows(&self, tool: &RegisteredTool) -> bool {
        self.check(tool).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::catalogue::RegisteredTool;

    fn policy(write_tools: bool, deny: &[&str]) -> RolePolicy {
        RolePolicy {
            write_tools,
            deny: deny.iter().map(|d| (*d).to_owned()).collect(),
        }
    }

    fn roles(list: &[&str]) -> Vec<String> {
        list.iter().map(|r| (*r).to_owned()).collect()
    }

    #[test]
    fn wildcards_match_runs_of_characters() {
        assert!(matches("resos__get*", "resos__getFeedback"));
        assert!(matches("*Feedback*", "resos__getFeedbackById"));
        assert!(matches("resos__createBooking", "resos__createBooking"));
        assert!(!matches("resos__create", "resos__createBooking"));
        assert!(!matches("a*b*c", "a_c_b"));
        assert!(matches("a*b*c", "a_b_c"));
        assert!(!matches("ab*ba", "aba"));
    }

    #[test]
    fn the_most_permissive_role_wins_and_unlisted_roles_are_free() {
        let policy = ToolPolicy::new(BTreeMap::from([
            ("user".to_owned(), policy(false, &["resos__getFeedback*"])),
            (
                "OPERATOR".to_owned(),
                policy(true, &["resos__getFeedback*"]),
            ),
            ("*".to_owned(), policy(false, &[])),
        ]));
        let read = RegisteredTool::for_test("resos__getTables", true);
        let write = RegisteredTool::for_test("resos__createBooking", false);
        let feedback = RegisteredTool::for_test("resos__getFeedback", true);

        let user = policy.for_roles(&roles(&["USER"]));
        assert!(user.allows(&read));
        assert_eq!(user.check(&write).unwrap_err(), Refused::WriteTools);
        assert!(!user.allows(&feedback));

        let both = policy.for_roles(&roles(&["USER", "OPERATOR"]));
        assert!(both.allows(&write));
        assert!(!both.allows(&feedback));

        let admin = policy.for_roles(&roles(&["USER", "ADMIN"]));
        assert!(admin.allows(&write) && admin.allows(&feedback));

        let nobody = policy.for_roles(&[]);
        assert!(nobody.allows(&read) && !nobody.allows(&write));
        assert!(ToolPolicy::default().for_roles(&[]).allows(&write));
    }
}
