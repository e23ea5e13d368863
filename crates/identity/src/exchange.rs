//! RFC 8693 token exchange: a confidential client that acts for a person trades the
//! person's access token for a short-lived one for the next hop, naming both: the
//! person as `sub`, the clients acting for them in `act` (the newest outermost).
//!
//! Which clients may exchange is configuration: the `token_exchange` grant, and
//! `subject_audiences`, the audiences of the tokens a client may present (the
//! resource it serves: the gateway presents tokens for the gateway). The new token's
//! audience is one of the client's own `audiences`, never the subject token's.

use serde::Deserialize;

use super::error::OAuthError;
use super::form::Params;
use super::registry::Client;
use super::tokens::{Actor, Extras, Issued, Refused, Subject};
use super::{SharedIdentity, policy, store};
use maitred_core::auth::SUBJECT_CLIENT;

pub(super) const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
pub(super) const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
const JWT_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";

/// The person, then the gateway, then the MCP server: two clients acting, no more.
const MAX_ACTORS: usize = 2;

/// The claims of a subject token this exchange reads.
#[derive(Deserialize)]
struct SubjectClaims {
    sub: String,
    aud: String,
    exp: i64,
    #[serde(default)]
    scope: String,
    client_id: Option<String>,
    act: Option<Actor>,
    sid: Option<String>,
    subject_type: Option<String>,
}

pub(super) struct Exchanged {
    pub access: Issued,
    pub scopes: Vec<String>,
}

pub(super) async fn token_exchange(
    identity: &SharedIdentity,
    client: &Client,
    params: &Params,
) -> Result<Exchanged, OAuthError> {
    // A public client proves nothing about who it is, so it cannot be named as an
    // actor; the registry refuses the grant for one, this is the second lock.
    if client.is_public() {
        return Err(OAuthError::unauthorized_client(
            "token exchange is only for confidential clients that authenticate with their secret",
        ));
    }
    let subject_token = params.required("subject_token")?;
    match params.required("subject_token_type")? {
        ACCESS_TOKEN_TYPE | JWT_TOKEN_TYPE => {}
        other => {
            return Err(OAuthError::invalid_request(format!(
                "subject_token_type {other} is not supported; use {ACCESS_TOKEN_TYPE}"
            )));
        }
    }
    if let Some(wanted) = params.one("requested_token_type")?
        && wanted != ACCESS_TOKEN_TYPE
    {
        return Err(OAuthError::invalid_request(format!(
            "requested_token_type {wanted} is not supported; this issuer issues {ACCESS_TOKEN_TYPE}"
        )));
    }
    if params.one("actor_token")?.is_some() {
        return Err(OAuthError::invalid_request(
            "actor_token is not supported: the actor is the client that authenticated",
        ));
    }

    let claims: SubjectClaims =
        identity
            .tokens
            .verify(subject_token)
            .map_err(|refused| match refused {
                Refused::Expired => OAuthError::invalid_grant("the subject token has expired"),
                Refused::Invalid => OAuthError::invalid_grant(
                    "the subject token is not a valid access token of this issuer",
                ),
            })?;
    let same = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
    if !client
        .subject_audiences
        .iter()
        .any(|a| same(a, &claims.aud))
    {
        return Err(OAuthError::invalid_grant(format!(
            "client {} may not exchange tokens issued for {}",
            client.id, claims.aud
        )));
    }
    if let Some(sid) = &claims.sid
        && store::family_revoked(&identity.db, sid).await?
    {
        return Err(OAuthError::invalid_grant(
            "the subject token's login has been revoked",
        ));
    }
    let depth = claims.act.as_ref().map_or(0, Actor::depth);
    if depth >= MAX_ACTORS {
        return Err(OAuthError::invalid_grant(format!(
            "the subject token already names {depth} acting clients; a chain may have at most {MAX_ACTORS}"
        )));
    }

    // The subject as the registry knows them now: a person removed since their token
    // was issued gets nothing, and their roles are today's.
    // Whether it is a client is what the token says (`subject_type`, or a
    // client-credentials token's `sub == client_id`), never a guess from its roles.
    let about_a_client = match claims.subject_type.as_deref() {
        Some(kind) => kind == SUBJECT_CLIENT,
        None => claims.act.is_none() && claims.client_id.as_deref() == Some(&claims.sub),
    };
    let user = identity.registry.user(&claims.sub);
    let subject_client = identity.registry.client(&claims.sub);
    let subject = match (user, subject_client) {
        (Some(user), _) if !about_a_client => Subject::User(user),
        (None, Some(_)) if about_a_client => Subject::OtherClient(&claims.sub),
        _ => {
            return Err(OAuthError::invalid_grant(
                "the subject token's subject is no longer a user or client of this issuer",
            ));
        }
    };

    let mut resources = params.all("resource");
    resources.extend(params.all("audience"));
    let audience = policy::audience(&resources, client)?;
    if same(&audience, &claims.aud) {
        return Err(OAuthError::invalid_target(format!(
            "a token cannot be exchanged for its own audience ({audience})"
        )));
    }

    let mut allowed = delegable_scopes(&claims.scope, &client.scopes);
    // A client acting for no person gets, through another client, only what its
    // own registration holds for that audience: a chat-only client stays chat-only
    // however far its token is exchanged.
    if let Some(own) = subject_client.filter(|_| about_a_client) {
        allowed = held_for(own, &audience, &allowed);
        if allowed.is_empty() {
            return Err(OAuthError::invalid_scope(format!(
                "client {} is registered for no scope at {audience} that {} may pass on",
                own.id, client.id
            )));
        }
    }
    if allowed.is_empty() {
        return Err(OAuthError::invalid_scope(format!(
            "the subject token allows nothing client {} may ask for (its scope: {:?})",
            client.id, claims.scope
        )));
    }
    let scopes = policy::scopes_within(params.one("scope")?, &allowed, &client.id)?;

    // Short-lived, and never past the subject token: a person whose login is revoked
    // stops reaching the tools within this.
    let now = chrono::Utc::now().timestamp();
    let lifetime = i64::try_from(identity.tokens.delegated_ttl.as_secs()).unwrap_or(300);
    let expires_at = claims.exp.min(now + lifetime);
    let act = Actor {
        sub: client.id.clone(),
        act: claims.act.map(Box::new),
    };
    let access = identity.tokens.access_token_with(
        &subject,
        &client.id,
        &audience,
        &scopes,
        &Extras {
            sid: claims.sid.as_deref(),
            act: Some(&act),
            expires_at: Some(expires_at),
        },
    )?;
    tracing::info!(
        client_id = %client.id,
        subject = ?claims.sub,
        audience = %audience,
        actors = depth + 1,
        "token exchanged"
    );
    Ok(Exchanged { access, scopes })
}

/// Of `allowed`, the scopes `client`'s own registration holds for `audience`: its
/// `scopes`, if `audience` is one of its `audiences`; else none.
fn held_for(client: &Client, audience: &str, allowed: &[String]) -> Vec<String> {
    let same = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
    if !client.audiences.iter().any(|a| same(a, audience)) {
        return Vec::new();
    }
    allowed
        .iter()
        .filter(|scope| client.scopes.contains(scope))
        .cloned()
        .collect()
}

/// The scopes a delegated token may carry: the client's, limited to the kinds of
/// access the subject token grants. Scopes are `resource.kind` (`mcp.read`,
/// `backend.write`); a person whose token may only read (`chat.read`) gets only
/// the read scopes downstream, whatever the client itself may do.
fn delegable_scopes(subject_scope: &str, client_scopes: &[String]) -> Vec<String> {
    let kind = |scope: &str| scope.rsplit_once('.').map(|(_, kind)| kind.to_owned());
    let kinds: Vec<String> = subject_scope.split_whitespace().filter_map(kind).collect();
    client_scopes
        .iter()
        .filter(|scope| kind(scope).is_some_and(|k| kinds.contains(&k)))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scopes(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_delegated_token_is_no_wider_than_the_person_or_the_client() {
        let client = scopes(&["mcp.read", "mcp.write"]);
        assert_eq!(
            delegable_scopes("openid chat.read chat.write", &client),
            client
        );
        assert_eq!(
            delegable_scopes("openid chat.read", &client),
            scopes(&["mcp.read"])
        );
        assert!(delegable_scopes("openid profile", &client).is_empty());
        assert_eq!(
            delegable_scopes("mcp.read mcp.write", &scopes(&["backend.read"])),
            scopes(&["backend.read"])
        );
    }

    #[test]
    fn a_chain_counts_its_actors() {
        let gateway = Actor {
            sub: "maitred-gateway".into(),
            act: None,
        };
        let mcp = Actor {
            sub: "maitred-mcp".into(),
            act: Some(Box::new(gateway.clone())),
        };
        assert_eq!(gateway.depth(), 1);
        assert_eq!(mcp.depth(), 2);
        let json = serde_json::to_value(&mcp).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"sub": "maitred-mcp", "act": {"sub": "maitred-gateway"}})
        );
    }
}
