#
# A word count over Spark's rate source, written as Spark's own Python examples are
# (examples/src/main/python/sql/streaming/structured_network_wordcount.py), with nothing of
# stream-autoscaler in it: run it with spark-submit, or unmodified under the autoscaler:
#
#   stream-autoscaler runner --script examples/pyspark/rate_wordcount.py -- <output dir> [rows/s]
#
# Every row of the rate source (value = 0, 1, 2, ...) is a word "w<value % 100>". Each
# micro-batch's updated counts are written with foreachBatch to <output dir>/batch=<id>,
# overwritten if the batch is replayed, so the output is idempotent: for every word, the count
# in its latest batch equals the number of values up to its max_value with that remainder.
#
import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import concat, count, lit
from pyspark.sql.functions import max as max_

if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("Usage: rate_wordcount.py <output dir> [rows per second]", file=sys.stderr)
        sys.exit(-1)
    output = sys.argv[1]
    rows_per_second = int(sys.argv[2]) if len(sys.argv) > 2 else 1000

    spark = SparkSession.builder.appName("RateWordCount").getOrCreate()

    rows = (spark.readStream.format("rate")
            .option("rowsPerSecond", rows_per_second)
            .option("numPartitions", 2)
            .load())
    words = rows.select(concat(lit("w"), (rows.value % 100).cast("string")).alias("word"),
                        rows.value)
    counts = words.groupBy("word").agg(count("*").alias("count"),
                                       max_("value").alias("max_value"))

    def write_batch(batch, batch_id):
        batch.write.mode("overwrite").parquet(f"{output}/batch={batch_id}")

    query = (counts.writeStream
             .outputMode("update")
             .foreachBatch(write_batch)
             .start())

    query.awaitTermination()
    spark.stop()
