package io.pacer.spark;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Map;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.metric.SQLMetric;
import scala.jdk.javaapi.CollectionConverters;

/**
 * An executed plan's tree with every node's SQL metrics, as one JSON string, for the Python driver
 * ({@code pacer_spark.plan.dag.read_plan}). Walking the tree over Py4J costs about five round trips per
 * node (tens of milliseconds per micro-batch); this is one call.
 *
 * <p>Each node is {@code {"name": nodeName, "metrics": {key: [value, metricType]}, "children":
 * [...]}}, children in the plan's order.
 */
public final class PlanReader {

  private PlanReader() {}

  /** The tree under {@code plan} as JSON; {@code metrics} false leaves every node's metrics empty. */
  public static String json(SparkPlan plan, boolean metrics) {
    return node(plan, metrics).toString();
  }

  private static ObjectNode node(SparkPlan plan, boolean metrics) {
    ObjectNode out = OffsetSnapshot.JSON.createObjectNode();
    out.put("name", plan.nodeName());
    ObjectNode values = out.putObject("metrics");
    if (metrics) {
      for (Map.Entry<String, SQLMetric> metric : CollectionConverters.asJava(plan.metrics()).entrySet()) {
        ArrayNode pair = values.putArray(metric.getKey());
        pair.add(metric.getValue().value());
        pair.add(metric.getValue().metricType());
      }
    }
    ArrayNode children = out.putArray("children");
    for (SparkPlan child : CollectionConverters.asJava(plan.children())) {
      children.add(node(child, metrics));
    }
    return out;
  }
}
