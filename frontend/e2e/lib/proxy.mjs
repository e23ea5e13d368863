// A reverse proxy in front of the gateway whose open event streams a test can cut.
// Chromium's offline emulation only fails new requests and lets a running response
// go on, so it cannot break an answer in the middle; dropping the TCP connection
// here does, the way a lost Wi-Fi or a restarted load balancer would.

import http from 'node:http';
import { once } from 'node:events';

export async function startProxy(port, targetPort) {
  const streams = new Set();
  const server = http.createServer((req, res) => {
    const upstream = http.request(
      { host: '127.0.0.1', port: targetPort, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode, answer.headers);
        if (String(answer.headers['content-type']).startsWith('text/event-stream')) {
          // Tracked per response, not per socket: a kept-alive socket outlives the
          // stream it carried, and cutting it then would test nothing.
          const socket = req.socket;
          streams.add(socket);
          res.once('close', () => streams.delete(socket));
        }
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  return {
    /** Drops every connection carrying an event stream; returns how many. */
    cutStreams() {
      const count = streams.size;
      for (const socket of streams) socket.destroy();
      streams.clear();
      return count;
    },
    openStreams: () => streams.size,
    async stop() {
      server.closeAllConnections();
      server.close();
    },
  };
}
