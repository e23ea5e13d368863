//! What a client may be given: only the scopes and audiences it is registered for.

use super::error::OAuthError;
use super::registry::Client;

/// No `scope` asked means every scope the client has; asking for more is an error
/// rather than a silent narrowing, so a misconfiguration shows up at once.
pub(super) fn scopes(requested: Option<&str>, client: &Client) -> Result<Vec<String>, OAuthError> {
    scopes_within(requested, &client.scopes, &client.id)
}

pub(super) fn scopes_within(
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
pub(super) fn audience(resources: &[&str], client: &Client) -> Result<String, OAuthError> {
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

/// Audience of a token from a stored grant (a code or a refresh token): the one the
/// user authorized, never another. Asking for a different `resource` is refused
/// rather than honoured, so a grant made for one service cannot be turned into
/// tokens for another the same client may also reach.
pub(super) fn granted_audience(
    resources: &[&str],
    granted: Option<&str>,
    client: &Client,
) -> Result<String, OAuthError> {
    // Grants stored before resources were recorded were made for the default audience.
    let granted = match granted {
        Some(granted) => granted.to_owned(),
        None => audience(&[], client)?,
    };
    let same = |a: &str| a.trim_end_matches('/') == granted.trim_end_matches('/');
    // The client may have lost the audience since (a config change): no more tokens for it.
    if !client.audiences.iter().any(|a| same(a)) {
        return Err(OAuthError::invalid_target(format!(
            "client {} may no longer get tokens for {granted}; sign in again",
            client.id
        )));
    }
    match resources {
        [] => Ok(granted),
        [resource] if same(resource) => Ok(granted),
        [resource] => Err(OAuthError::invalid_target(format!(
            "this grant is for {granted}, not {resource}; a token for {resource} needs its own authorization"
        ))),
        _ => Err(OAuthError::invalid_target("ask for one resource per token")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> Client {
        Client {
            id: "two-audiences".into(),
            secret: None,
            grants: Vec::new(),
            scopes: Vec::new(),
            audiences: vec![
                "https://chat.example".into(),
                "https://mcp.example/mcp".into(),
            ],
            redirect_uris: Vec::new(),
            subject_audiences: Vec::new(),
        }
    }

    #[test]
    fn a_grant_keeps_the_audience_it_was_made_for() {
        let client = client();
        let granted = Some("https://chat.example");
        assert_eq!(
            granted_audience(&[], granted, &client).unwrap(),
            "https://chat.example"
        );
        assert_eq!(
            granted_audience(&["https://chat.example/"], granted, &client).unwrap(),
            "https://chat.example"
        );
        let switched =
            granted_audience(&["https://mcp.example/mcp"], granted, &client).unwrap_err();
        assert_eq!(switched.error, "invalid_target");
        assert!(switched.description.contains("needs its own authorization"));
        // Grants from before resources were stored stand for the default audience.
        assert_eq!(
            granted_audience(&[], None, &client).unwrap(),
            "https://chat.example"
        );
        assert_eq!(
            granted_audience(&["https://mcp.example/mcp"], None, &client)
                .unwrap_err()
                .error,
            "invalid_target"
        );
        // An audience the client has lost since is not renewed.
        assert_eq!(
            granted_audience(&[], Some("https://gone.example"), &client)
                .unwrap_err()
                .error,
            "invalid_target"
        );
    }
}
