//===- Streams.h - Streams and events for the runtime API -------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// What Cudart.cpp needs of Device.cpp beyond Device.h: creating and
// querying streams and events. Return values are cudaError_t codes.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_EMULATOR_STREAMS_H
#define BRAID_EMULATOR_STREAMS_H

namespace braid::emu {

struct Event;

void *createStream(int priority, bool nonBlocking);
int destroyStream(void *stream);
bool validStream(void *stream);
/// 0 when idle, cudaErrorNotReady (600) while work is pending.
int queryStream(void *stream);
int synchronizeDevice();

Event *createEvent(bool timing);
/// Whether `event` was created with timing (false for an unknown one).
bool timingEvent(Event *event);
int destroyEvent(Event *event);
int recordEvent(Event *event, void *stream);
int streamWaitEvent(void *stream, Event *event);
int queryEvent(Event *event);
int synchronizeEvent(Event *event);
int elapsedTime(float *ms, Event *start, Event *end);

} // namespace braid::emu

#endif // BRAID_EMULATOR_STREAMS_H
