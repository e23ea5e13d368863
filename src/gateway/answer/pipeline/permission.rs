//! Whether a call may run: the question's budget of calls and the person's role
//! policy first, then, for a call that changes data (or that the operator put behind
//! approval), the person's own yes.

use super::super::Answer;
use super::super::ports::{ApprovalRequest, Approver, StoreResult, Verdict};
use super::super::recorder::ShownCall;
use crate::gateway::tools::RegisteredTool;
use crate::gateway::tools::policy::{Refused, ToolPolicy};

/// Why a call may not run before anyone is asked.
#[derive(Debug, thiserror::Error)]
pub enum NotAllowed {
    #[error("the limit of {0} tool calls for one question is reached")]
    Budget(usize),
    #[error(transparent)]
    Policy(#[from] Refused),
}

/// Within the budget (`budget_spent` names the limit once it is spent) and the
/// policy, or why not.
pub fn allowed(
    policy: &ToolPolicy,
    answer: &Answer<'_>,
    tool: &RegisteredTool,
    budget_spent: Option<usize>,
) -> Result<(), NotAllowed> {
    if let Some(limit) = budget_spent {
        return Err(NotAllowed::Budget(limit));
    }
    Ok(policy.for_roles(&answer.user.roles).check(tool)?)
}

/// Asks the person, unless an approval of this very call is still remembered.
/// `Err` is why the call may not run.
pub async fn approved(
    approver: &dyn Approver,
    answer: &Answer<'_>,
    shown: &ShownCall,
) -> StoreResult<Result<(), &'static str>> {
    let request = ApprovalRequest {
        id: &shown.id,
        answer: answer.recorder.answer(),
        server: &shown.server,
        tool: &shown.tool,
        arguments: &shown.arguments,
    };
    if approver.remembered(&request).await? {
        return Ok(Ok(()));
    }
    let expires_at = approver.open(&request).await?;
    answer.recorder.approval_required(shown, expires_at).await?;
    let _waiting = answer.recorder.waiting_for_approval();
    let verdict = approver
        .wait(&request, &answer.recorder.cancelled())
        .await?;
    Ok(match verdict {
        Verdict::Approved | Verdict::Remembered => Ok(()),
        Verdict::Denied => Err("denied by the user"),
        Verdict::Expired => Err("not approved in time"),
        Verdict::Cancelled => Err("cancelled"),
    })
}
