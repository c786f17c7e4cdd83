// The import rule (docs/architecture.md, "Layers"): src/ is a stack of rooms, and an import points down or sideways
// within its room, never up; no cycles. Type-only imports count (tsPreCompilationDeps): a type that points up ties
// the rooms together as surely as a value does. `npm run lint` runs it (depcruise src).
//
//   4  entry points    compose.ts, program.ts, cli.ts, server/, petstore/
//   3  application     pipeline/, admin/, dashboard/, commands/, workers/, portal/
//   2  domain          routing/ < keys/ < consumers/ < identity/ < limits/ < usage/ < events/ < metering/ < access/
//                      (each may import those before it, never after; a room with no folder yet matches nothing)
//   1  infrastructure  http/, config/, storage/, observability/, openapi/, validation/, outbound/
//   0  util/
//
// src/types/ holds ambient declarations for untyped packages; nothing imports it.
const ROOM = {
  util: '^src/util/',
  base: '^src/(http|config|storage|observability|openapi|validation|outbound)/',
  routing: '^src/routing/',
  keys: '^src/keys/',
  consumers: '^src/consumers/',
  identity: '^src/identity/',
  limits: '^src/limits/',
  usage: '^src/usage/',
  events: '^src/events/',
  metering: '^src/metering/',
  access: '^src/access/',
  app: '^src/(pipeline|admin|dashboard|commands|workers|portal)/',
  top: '^src/(compose\\.ts|program\\.ts|cli\\.ts|server/|petstore/)',
  types: '^src/types/',
};
const ABOVE = {
  util: [
    ROOM.base,
    ROOM.routing,
    ROOM.keys,
    ROOM.consumers,
    ROOM.identity,
    ROOM.limits,
    ROOM.usage,
    ROOM.events,
    ROOM.metering,
    ROOM.access,
    ROOM.app,
    ROOM.top,
  ],
  base: [ROOM.routing, ROOM.keys, ROOM.consumers, ROOM.identity, ROOM.limits, ROOM.usage, ROOM.events, ROOM.metering, ROOM.access, ROOM.app, ROOM.top],
  routing: [ROOM.keys, ROOM.consumers, ROOM.identity, ROOM.limits, ROOM.usage, ROOM.events, ROOM.metering, ROOM.access, ROOM.app, ROOM.top],
  keys: [ROOM.consumers, ROOM.identity, ROOM.limits, ROOM.usage, ROOM.events, ROOM.metering, ROOM.access, ROOM.app, ROOM.top],
  consumers: [ROOM.identity, ROOM.limits, ROOM.usage, ROOM.events, ROOM.metering, ROOM.access, ROOM.app, ROOM.top],
  identity: [ROOM.limits, ROOM.usage, ROOM.events, ROOM.metering, ROOM.access, ROOM.app, ROOM.top],
  limits: [ROOM.usage, ROOM.events, ROOM.metering, ROOM.access, ROOM.app, ROOM.top],
  usage: [ROOM.events, ROOM.metering, ROOM.access, ROOM.app, ROOM.top],
  events: [ROOM.metering, ROOM.access, ROOM.app, ROOM.top],
  metering: [ROOM.access, ROOM.app, ROOM.top],
  access: [ROOM.app, ROOM.top],
  app: [ROOM.top],
};

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle: break it by moving the shared part down a room (or into a module of its own), or by passing it in.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    ...Object.entries(ABOVE).map(([room, above]) => ({
      name: `${room}-not-up`,
      severity: 'error',
      comment: `${ROOM[room]} imports a higher room: move the shared part down, or have the composition root pass it in.`,
      from: { path: ROOM[room] },
      to: { path: above },
    })),
    {
      name: 'in-a-room',
      severity: 'error',
      comment: 'A module outside every room: add its folder to a room in .dependency-cruiser.cjs and docs/architecture.md.',
      from: { path: '^src/', pathNot: Object.values(ROOM) },
      to: { path: '^src/' },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import that resolves to no file: the rule above would not see where it points.',
      from: { path: '^src/' },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    includeOnly: '^src/',
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
