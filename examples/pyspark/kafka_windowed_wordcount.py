#
# Counts words per 10-second event-time window over a Kafka topic, with a watermark, written as
# Spark's own examples are (examples/src/main/python/sql/streaming/structured_kafka_wordcount.py
# with the window of structured_network_wordcount_windowed.py), with nothing of
# stream-autoscaler in it:
#
#   stream-autoscaler runner --script examples/pyspark/kafka_windowed_wordcount.py -- \
#       <bootstrap-servers> <topic> <output dir> [max offsets per trigger]
#
# A record's key is its word and its Kafka timestamp its event time. A window's counts are
# written once, when the watermark passes its end (append mode), to Spark's parquet file sink.
#
import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, window

if __name__ == "__main__":
    if len(sys.argv) < 4:
        print("Usage: kafka_windowed_wordcount.py <bootstrap-servers> <topic> <output dir> "
              "[max offsets per trigger]", file=sys.stderr)
        sys.exit(-1)
    bootstrap_servers, topic, output = sys.argv[1:4]

    spark = SparkSession.builder.appName("KafkaWindowedWordCount").getOrCreate()

    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap_servers)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest"))
    if len(sys.argv) > 4:
        reader = reader.option("maxOffsetsPerTrigger", sys.argv[4])
    words = reader.load().selectExpr("CAST(key AS STRING) AS word", "timestamp")

    counts = (words.withWatermark("timestamp", "10 seconds")
              .groupBy(window(col("timestamp"), "10 seconds"), col("word"))
              .count()
              .select(col("window.start").alias("window_start"),
                      col("window.end").alias("window_end"), "word", "count"))

    query = (counts.writeStream
             .outputMode("append")
             .format("parquet")
             .option("path", output)
             .start())

    query.awaitTermination()
