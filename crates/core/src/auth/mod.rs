//! The resource-server side of OAuth 2, shared by every role: validate a bearer JWT
//! from the trusted issuer (keys from its JWKS) and hand handlers a typed principal.

mod error;
mod extract;
mod jwks;
mod remembered;
mod verifier;

pub use error::{AuthError, AuthErrorKind};
pub use extract::{RequiredScope, Scoped, authenticate, bearer_token};
pub use jwks::JwksCache;
pub use verifier::{Principal, SUBJECT_CLIENT, SUBJECT_PERSON, TokenVerifier, VerifierConfig};
