#
# A stream-stream inner join with watermarks, written as Spark's own examples are (the
# "Stream-stream Joins" section of the Structured Streaming guide), with nothing of
# stream-autoscaler in it:
#
#   stream-autoscaler runner --script examples/pyspark/rate_join.py -- <output dir> [rows/s]
#
# Two rate sources play impressions and clicks: every impression (ad_id = value) is clicked
# once, by the click with the same value. The joined rows go to a parquet directory (the file
# sink commits each batch once), so every ad_id must appear exactly once in the output.
#
import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import expr

if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("Usage: rate_join.py <output dir> [rows per second]", file=sys.stderr)
        sys.exit(-1)
    output = sys.argv[1]
    rows_per_second = int(sys.argv[2]) if len(sys.argv) > 2 else 500

    spark = SparkSession.builder.appName("RateJoin").getOrCreate()

    impressions = (spark.readStream.format("rate").option("rowsPerSecond", rows_per_second)
                   .load()
                   .selectExpr("value AS ad_id", "timestamp AS impression_time"))
    clicks = (spark.readStream.format("rate").option("rowsPerSecond", rows_per_second)
              .load()
              .selectExpr("value AS click_ad_id", "timestamp AS click_time"))

    joined = (impressions.withWatermark("impression_time", "10 seconds")
              .join(clicks.withWatermark("click_time", "10 seconds"),
                    expr("""
                        click_ad_id = ad_id AND
                        click_time >= impression_time - interval 30 seconds AND
                        click_time <= impression_time + interval 30 seconds
                    """)))

    query = (joined.writeStream
             .format("parquet")
             .option("path", output)
             .outputMode("append")
             .start())

    query.awaitTermination()
