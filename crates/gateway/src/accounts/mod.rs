//! Connected accounts: each person's own sign-in at a third-party MCP server that
//! runs its own authorization server (`auth.type = "user_oauth"`).

pub mod view;
