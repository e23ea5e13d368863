// A reverse proxy in front of the gateway whose open event streams a test can cut.
// Chromium's offline emulation only fails new requests and lets a running response
// go on, so it cannot break an answer in the middle; dropping the TCP connection
// here does, the way a lost Wi-Fi or a restarted load balancer would. It can also
// pace event streams, one event at a time, as a slow link would deliver them: then
// a quick run of events reaches the page as separate renders a test can see.

import http from 'node:http';
import { once } from 'node:events';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Forwards an event stream event by event, waiting `pace()` ms after each. */
function forwardPaced(from, to, pace) {
  let pending = '';
  let chain = Promise.resolve();
  from.setEncoding('utf8');
  from.on('data', (chunk) => {
    pending += chunk;
    const events = pending.split('\n\n');
    pending = events.pop();
    for (const event of events) {
      chain = chain.then(async () => {
        if (to.destroyed) return;
        to.write(`${event}\n\n`);
        const ms = pace();
        if (ms > 0) await sleep(ms);
      });
    }
  });
  from.on('end', () => {
    chain = chain.then(() => to.end(pending));
  });
}

export async function startProxy(port, targetPort) {
  const streams = new Set();
  let paceMs = 0;
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
          if (paceMs > 0) {
            forwardPaced(answer, res, () => paceMs);
            return;
          }
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
    /**
     * Event streams that start from now on pass one event every `ms` (0: at once, as
     * they come); a stream already paced follows a change at its next event.
     */
    paceStreams(ms) {
      paceMs = ms;
    },
    async stop() {
      server.closeAllConnections();
      server.close();
    },
  };
}
