import { SonarError, ErrorCode } from '../../../actors/errors.js';
import type { DashboardActions } from './actions.js';
import type { DashboardData } from './dashboard-data.js';
import { readBody, sendJson } from './http-util.js';
import { filterParams, idParam, limitParam } from './params.js';
import type { Router } from './router.js';
import type { EventHub, StreamRequest } from './sse-hub.js';
import { publicEvent } from './views/public-event.js';

export interface ApiDeps {
  data: DashboardData;
  hub: EventHub;
  actions: DashboardActions;
}

const notFound = (what: string) => new SonarError(ErrorCode.NotFound, `no ${what}`);

/**
 * The read API (`GET /api/...`, JSON) and the actions (`POST /api/...`). Reads answer from
 * the backend's projection; every value that could hold a secret is left out (see
 * views/public-event.ts). Errors use the wire form `{"error":{"code","message","details"}}`.
 */
export function apiRoutes(router: Router, deps: ApiDeps): void {
  const { data, hub, actions } = deps;
  router
    .get('/api/overview', async ({ res }) => sendJson(res, 200, await data.overview()))
    .get('/api/runs', ({ res, url }) =>
      sendJson(res, 200, { runs: data.runs(limitParam(url.searchParams, 'limit', 200, 10_000)) }),
    )
    .get('/api/schedules', ({ res }) => sendJson(res, 200, { schedules: data.schedules() }))
    .get('/api/runs/:runId', async ({ res, url, params }) => {
      const runId = idParam('runId', params['runId']);
      const run = await data.run(runId, limitParam(url.searchParams, 'tasks', 100, 10_000));
      if (!run) throw notFound(`run ${runId}`);
      sendJson(res, 200, run);
    })
    .get('/api/tasks/:runId/:taskId', async ({ res, params }) => {
      const runId = idParam('runId', params['runId']);
      const taskId = idParam('taskId', params['taskId']);
      const task = await data.task(runId, taskId);
      if (!task) throw notFound(`task ${runId}.${taskId}`);
      sendJson(res, 200, task);
    })
    .get('/api/events', ({ res, url }) => {
      const filter = filterParams(url.searchParams);
      const limit = limitParam(url.searchParams, 'limit', 100, 1_000);
      sendJson(res, 200, { events: hub.recent(filter, limit).map(publicEvent) });
    })
    .get('/api/poisoned', async ({ res, url }) => {
      const run = url.searchParams.get('run') || undefined;
      const limit = limitParam(url.searchParams, 'limit', 50, 1_000);
      sendJson(res, 200, await data.poisoned(limit, run && idParam('run', run)));
    })
    .get('/api/stream', async ({ req, res, url }) => {
      const q = url.searchParams;
      const mode = q.get('mode') ?? 'events';
      if (mode !== 'events' && mode !== 'changes') {
        throw new SonarError(ErrorCode.Validation, `'mode' must be events or changes`);
      }
      const stream: StreamRequest = { mode, filter: filterParams(q) };
      const last = req.headers['last-event-id'] ?? q.get('after');
      if (typeof last === 'string' && /^\d+$/.test(last)) stream.after = Number(last);
      if (q.get('registry') === '1') stream.registry = true;
      await hub.attach(res, stream);
    })
    .post('/api/runs/:runId/cancel', async ({ req, res, params }) => {
      const runId = idParam('runId', params['runId']);
      sendJson(res, 200, await actions.cancel(runId, undefined, await readBody(req)));
    })
    .post('/api/tasks/:runId/:taskId/cancel', async ({ req, res, params }) => {
      const runId = idParam('runId', params['runId']);
      const taskId = idParam('taskId', params['taskId']);
      sendJson(res, 200, await actions.cancel(runId, taskId, await readBody(req)));
    })
    .post('/api/poisoned/:task/retry', async ({ res, params }) => {
      sendJson(res, 200, await actions.retry(params['task'] ?? ''));
    })
    .post('/api/poisoned/:task/cancel', async ({ req, res, params }) => {
      sendJson(res, 200, await actions.cancelPoisoned(params['task'] ?? '', await readBody(req)));
    });
}
