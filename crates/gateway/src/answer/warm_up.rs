//! Warming up a local model at start. A small model on a laptop reads its prompt at
//! 50-100 tokens a second, and every question begins with the same 1,500-2,500: the
//! system prompt and the tool definitions. llama.cpp's servers keep the prompt they
//! last read and read only what differs, so one request at start, for one token,
//! spares the first person that wait.

use std::time::Duration;

use super::{Answerer, prompt};
use maitred_llm::{ChatRequest, Message};

/// How long to wait for the tools to be discovered before warming up without them.
const TOOLS_WAIT: Duration = Duration::from_secs(30);

impl Answerer {
    /// Sends the prompt a question begins with to each model whose profile asks for
    /// it. The tools are those a person with no role is offered (the policy's `*`).
    pub async fn warm_up(&self) {
        if !self.models.wants_warm_up() {
            return;
        }
        let started = tokio::time::Instant::now();
        let catalogue = loop {
            let catalogue = self.tools.catalogue(None).await;
            if !catalogue.tools.is_empty() || started.elapsed() >= TOOLS_WAIT {
                break catalogue;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let tools = self.offered(&catalogue, &[], &[]);
        let request = ChatRequest {
            messages: vec![
                Message::System {
                    content: prompt::system_prompt(self.limits.system_prompt.as_deref()),
                },
                Message::User {
                    content: "Hello".to_owned(),
                },
            ],
            tools,
            temperature: None,
            max_tokens: Some(1),
            answer_only: false,
        };
        self.models.warm_up(&request).await;
    }
}
