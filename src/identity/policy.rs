//! What a client may be given: only the scopes and audiences it is registered for.

use super::error::OAuthError;
use super::registry::Client;

/// No `scope` asked means every scope the client has; asking for more is an error
/// rather than a silent narrowing, so a misconfiguration shows up at once.
pub fn scopes(requested: Option<&str>, client: &Client) -> Result<Vec<String>, OAuthError> {
    scopes_within(requested, &client.scopes, &client.id)
}

pub fn scopes_within(
    requested: Option<&str>,
    allowed: &[String],
    client_id: &str,
) -> Result<Vec<String>, OAuthError> {
    let Some(requested) = requested.filter(|s| !s.trim().is_empty()) else {
        return Ok(allowed.to_vec());
    };
    let mut granted = Vec::new();
    for scope in requested.split_whitespace() {
        if !allowed.iter().any(|a| a == scope) {
            return Err(OAuthError::invalid_scope(format!(
                "the scope {scope} is not allowed for client {client_id}; allowed: {}",
                allowed.join(" ")
            )));
        }
        if !granted.iter().any(|g| g == scope) {
            granted.push(scope.to_owned());
        }
    }
    Ok(granted)
}

/// RFC 8707: one resource per token, and only one the client is registered for.
pub fn audience(resources: &[&str], client: &Client) -> Result<String, OAuthError> {
    match resources {
        [] => client
            .default_audience()
            .map(str::to_owned)
            .ok_or_else(|| OAuthError::invalid_target("the client has no audience")),
        [resource] => {
            let wanted = resource.trim_end_matches('/');
            client
                .audiences
                .iter()
                .find(|a| a.trim_end_matches('/') == wanted)
                .cloned()
                .ok_or_else(|| {
                    OAuthError::invalid_target(format!(
                        "client {} may not get tokens for {resource}; allowed: {}",
                        client.id,
                        client.audiences.join(" ")
                    ))
                })
        }
        _ => Err(OAuthError::invalid_target("ask for one resource per token")),
    }
}

/// Audience of a token from a stored grant: the one the grant was made for, unless
/// the request names another the client may have.
pub fn audience_or_granted(
    resources: &[&str],
    granted: Option<&str>,
    client: &Client,
) -> Result<String, OAuthError> {
    match (resources, granted) {
        ([], Some(granted)) => Ok(granted.to_owned()),
        (requested, _) => audience(requested, client),
    }
}
