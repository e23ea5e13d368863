//! A browser for the BFF login: its own cookie jar, redirects followed by hand so each
//! hop can be checked, and the identity provider's login form filled in as a person
//! would fill it in.

use serde_json::Value;

use crate::helpers::TestApp;

pub(crate) struct Browser {
    pub http: reqwest::Client,
}

/// A signed-in browser and the CSRF token its writes carry.
pub(crate) struct SignedIn {
    pub browser: Browser,
    pub csrf: String,
}

impl Browser {
    pub(crate) fn new() -> Self {
        Self {
            http: reqwest::Client::builder()
                .cookie_store(true)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        }
    }

    /// `/login` (with `return_to`, if any), then the identity provider's form, signed
    /// in as `username`; stops before the callback and returns its URL.
    pub(crate) async fn sign_in_until_callback(
        &self,
        app: &TestApp,
        username: &str,
        return_to: Option<&str>,
    ) -> String {
        let mut login = reqwest::Url::parse(&format!("{}/login", app.gateway_url)).unwrap();
        if let Some(return_to) = return_to {
            login.query_pairs_mut().append_pair("return_to", return_to);
        }
        let login = self.http.get(login).send().await.unwrap();
        assert_eq!(login.status(), 303);
        let authorize = login.headers()["location"].to_str().unwrap().to_owned();
        assert!(
            authorize.starts_with(&format!("{}/oauth2/authorize?", app.url))
                && authorize.contains("client_id=maitred-web")
                && authorize.contains("code_challenge_method=S256"),
            "{authorize}"
        );
        let page = self
            .http
            .get(&authorize)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let field = |name: &str| -> String {
            let marker = format!("name=\"{name}\" value=\"");
            let start = page.find(&marker).unwrap() + marker.len();
            let end = page[start..].find('"').unwrap() + start;
            page[start..end]
                .replace("&#x2f;", "/")
                .replace("&#47;", "/")
                .replace("&amp;", "&")
        };
        let mut form: Vec<(String, String)> = [
            "response_type",
            "client_id",
            "redirect_uri",
            "scope",
            "state",
            "nonce",
            "code_challenge",
            "code_challenge_method",
            "resource",
            "csrf_token",
        ]
        .iter()
        .map(|n| ((*n).to_owned(), field(n)))
        .collect();
        form.push(("username".into(), username.into()));
        form.push((
            "password".into(),
            app.credentials().users[username].password.clone(),
        ));
        let signed_in = self
            .http
            .post(format!("{}/oauth2/authorize", app.url))
            .header("origin", &app.url)
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(signed_in.status(), 303);
        let callback = signed_in.headers()["location"].to_str().unwrap().to_owned();
        assert!(
            callback.starts_with(&format!("{}/login/callback?", app.gateway_url)),
            "{callback}"
        );
        callback
    }

    pub(crate) async fn get(&self, url: &str) -> reqwest::Response {
        self.http.get(url).send().await.unwrap()
    }

    pub(crate) async fn status(&self, app: &TestApp) -> Value {
        self.get(&format!("{}/api/auth/status", app.gateway_url))
            .await
            .json()
            .await
            .unwrap()
    }

    /// The whole sign-in, landing back on the gateway.
    pub(crate) async fn sign_in(self, app: &TestApp, username: &str) -> SignedIn {
        let callback = self.sign_in_until_callback(app, username, None).await;
        let landed = self.get(&callback).await;
        assert_eq!(landed.status(), 303, "{}", landed.text().await.unwrap());
        let status = self.status(app).await;
        assert_eq!(status["authenticated"], true, "{status}");
        let csrf = status["csrf_token"].as_str().unwrap().to_owned();
        SignedIn {
            browser: self,
            csrf,
        }
    }
}
