// Header-injecting loopback proxy for the MCP conformance suite (which has no auth option).
// Usage: MCP_TOKEN=... node auth-proxy.mjs <listenPort> <targetBaseUrl>
//   e.g. node auth-proxy.mjs 9100 http://127.0.0.1:8080
// Adds `Authorization: Bearer $MCP_TOKEN` to every request that has none, and forwards
// everything else untouched (Host/Origin included, so dns-rebinding-protection still tests
// the real server). Streams request and response bodies (SSE-safe). No dependencies.
import http from 'node:http';

const [listenPort, target] = process.argv.slice(2);
const token = process.env.MCP_TOKEN;
if (!listenPort || !target || !token) {
  console.error('usage: MCP_TOKEN=... node auth-proxy.mjs <listenPort> <targetBaseUrl>');
  process.exit(2);
}
const t = new URL(target);

http
  .createServer((req, res) => {
    const headers = { ...req.headers };
    if (!headers.authorization) headers.authorization = `Bearer ${token}`;
    const up = http.request(
      { host: t.hostname, port: t.port, method: req.method, path: req.url, headers },
      (upRes) => {
        res.writeHead(upRes.statusCode, upRes.statusMessage, upRes.rawHeaders);
        upRes.pipe(res);
      }
    );
    up.on('error', (e) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`proxy error: ${e.message}`);
    });
    res.on('close', () => up.destroy()); // client went away (e.g. cancelled SSE) -> close upstream
    req.pipe(up);
  })
  .listen(Number(listenPort), '127.0.0.1', () =>
    console.error(`auth-proxy: 127.0.0.1:${listenPort} -> ${target}`)
  );
