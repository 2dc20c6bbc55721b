"""The baselines pacer ships, registered by default and ``trylast``.

- admission: ``static`` (Spark's ``processingTime`` trigger), ``asap`` (Spark's default trigger), ``min-rows``
  (Kafka's ``minOffsetsPerTrigger`` + ``maxTriggerDelay``), ``pid`` (Spark Streaming's backpressure);
- scheduling: ``fifo``, ``fair``;
- placement: ``cpu-only``, ``gpu-only``, ``static-preference`` (LMStream Table II);
- scaling: ``fixed`` (the default), ``spark-dynamic`` (Spark's dynamic allocation), ``dstream-ratio`` (Spark
  Streaming's dynamic allocation), ``scheduled`` (a timetable of executors).
"""
