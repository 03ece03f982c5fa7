// The bus messages of proto/dws/v1 (generated, committed: `pnpm proto`
// regenerates, `pnpm proto:check` fails when stale) and the runtime calls to
// build and (de)serialise them.
export * from './gen/dws/v1/bus_pb.js';
export * from './gen/dws/v1/commands_pb.js';
export * from './gen/dws/v1/invoker_pb.js';
export { create, fromBinary, toBinary } from '@bufbuild/protobuf';
