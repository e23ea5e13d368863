//! Whether a call may run: the question's budget of calls and the person's role
//! policy first, then, for a call that changes data (or that the operator put behind
//! approval), the person's own yes.

use super::super::ports::{ApprovalRequest, Approver, Asked, StoreResult, Verdict};
use super::super::recorder::ShownCall;
use super::super::{Answer, Asking};
use crate::tools::RegisteredTool;
use crate::tools::policy::{Refused, ToolPolicy};

/// Why a call may not run before anyone is asked.
#[derive(Debug, thiserror::Error)]
pub(super) enum NotAllowed {
    #[error("the limit of {0} tool calls for one question is reached")]
    Budget(usize),
    #[error(transparent)]
    Policy(#[from] Refused),
}

/// Within the budget (`budget_spent` names the limit once it is spent) and the
/// policy, or why not.
pub(super) fn allowed(
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

/// Why a call that needs approval may not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unapproved {
    /// The person was asked: denied, not in time, or the answer was stopped.
    Decided(&'static str),
    /// Nobody could be asked, for this reason.
    CannotAsk(&'static str),
}

impl Unapproved {
    /// The call's summary, as its `tool_result` shows it.
    pub(super) fn summary(&self) -> &'static str {
        match self {
            Self::Decided(reason) | Self::CannotAsk(reason) => reason,
        }
    }

    /// What the model is told instead of the tool's result.
    pub(super) fn tell_model(&self) -> String {
        match self {
            Self::Decided(reason) => format!(
                "The user did not allow this call ({reason}). Nothing was changed. Tell the user, and do not try it again unless they ask."
            ),
            Self::CannotAsk(reason) => format!(
                "Refused: this call needs the user's approval, and {reason}. Nothing was changed. Tell the user that this change cannot be made from here, and do not try it again."
            ),
        }
    }
}

/// What the person's approval came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Permit {
    Granted,
    Refused(Unapproved),
    /// Asked, to be answered in a later request ([`Asking::Later`]): the call waits
    /// for the answer that brings the decision.
    Deferred,
}

/// Asks the person, unless an approval of this very call is still remembered or
/// nobody can be asked.
pub(super) async fn approved(
    approver: &dyn Approver,
    answer: &Answer<'_>,
    shown: &ShownCall,
) -> StoreResult<Permit> {
    let request = ApprovalRequest {
        id: &shown.id,
        answer: answer.recorder.answer(),
        server: &shown.server,
        tool: &shown.tool,
        arguments: &shown.arguments,
    };
    if approver.remembered(&request).await? {
        return Ok(Permit::Granted);
    }
    if let Asking::Never { why } = answer.asking {
        return Ok(Permit::Refused(Unapproved::CannotAsk(why)));
    }
    let expires_at = approver.open(&request).await?;
    answer.recorder.approval_required(shown, expires_at).await?;
    if answer.asking == Asking::Later {
        return Ok(Permit::Deferred);
    }
    let _waiting = answer.recorder.waiting_for_approval();
    let verdict = approver
        .wait(&request, &answer.recorder.cancelled())
        .await?;
    Ok(judged(verdict))
}

fn judged(verdict: Verdict) -> Permit {
    match verdict {
        Verdict::Approved | Verdict::Remembered => Permit::Granted,
        Verdict::Denied => Permit::Refused(Unapproved::Decided("denied by the user")),
        Verdict::Expired => Permit::Refused(Unapproved::Decided("not approved in time")),
        Verdict::Cancelled => Permit::Refused(Unapproved::Decided("cancelled")),
    }
}

/// For a call sent again (after a takeover, or in the answer that brings the
/// person's decision): an approval given stays given, one refused stays refused; one
/// waiting, or never asked, is asked (again): its replica may have died after
/// recording the request and before showing it, so it is shown again (the same id: a
/// viewer who saw it sees the same card) and waited for anew.
pub(super) async fn approved_again(
    approver: &dyn Approver,
    answer: &Answer<'_>,
    shown: &ShownCall,
) -> StoreResult<Permit> {
    match approver.asked(&shown.id).await? {
        Asked::Decided(verdict) => Ok(judged(verdict)),
        Asked::Never | Asked::Waiting => approved(approver, answer, shown).await,
    }
}
