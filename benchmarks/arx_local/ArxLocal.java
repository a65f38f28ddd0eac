import java.io.File;
import java.util.Arrays;
import java.util.List;

import org.deidentifier.arx.ARXAnonymizer;
import org.deidentifier.arx.ARXConfiguration;
import org.deidentifier.arx.ARXLattice.ARXNode;
import org.deidentifier.arx.ARXProcessStatistics;
import org.deidentifier.arx.ARXResult;
import org.deidentifier.arx.Data;
import org.deidentifier.arx.DataHandle;
import org.deidentifier.arx.criteria.KAnonymity;
import org.deidentifier.arx.metric.Metric;

/**
 * duckanon's benchmark driver for ARX 3.9.2's local recoding (bench_local_recoding.py).
 *
 *   java -cp CLASSES:ARX_JARS ArxLocal CSV DELIM HIERARCHY_PATTERN QI1,QI2,... K SUPPRESSION GS ITERATIONS OUTPUT
 *
 * k-anonymity with the suppression limit SUPPRESSION, ARX's Loss (gs-factor GS, geometric mean); the optimal
 * full-domain generalization (Flash), then ARXResult.optimizeIterative(output, GS, ITERATIONS, 0): the suppressed
 * records anonymized again among themselves until a step releases none. The output (every record, its own levels,
 * '*' where suppressed) is written to OUTPUT. Prints LOAD, GLOBAL (levels, suppressed, ms) and LOCAL (steps,
 * suppressed, ms) lines.
 */
public class ArxLocal {

    public static void main(String[] args) throws Exception {
        if (args.length != 9) {
            System.err.println("usage: ArxLocal CSV DELIM HIERARCHY_PATTERN QIS K SUPPRESSION GS ITERATIONS OUTPUT");
            System.exit(2);
        }
        String csv = args[0];
        char delim = args[1].equals("tab") ? '\t' : args[1].charAt(0);
        String pattern = args[2];
        List<String> qis = Arrays.asList(args[3].split(","));
        int k = Integer.parseInt(args[4]);
        double suppression = Double.parseDouble(args[5]);
        double gs = Double.parseDouble(args[6]);
        int iterations = Integer.parseInt(args[7]);
        File output = new File(args[8]);

        long t0 = System.nanoTime();
        Data data = ArxCsv.load(csv, delim, pattern, qis, null);
        int rows = data.getHandle().getNumRows();
        System.out.printf("LOAD rows=%d load_ms=%d%n", rows, (System.nanoTime() - t0) / 1_000_000);

        ARXConfiguration config = ARXConfiguration.create();
        config.addPrivacyModel(new KAnonymity(k));
        config.setSuppressionLimit(suppression);
        config.setQualityModel(Metric.createLossMetric(gs, Metric.AggregateFunction.GEOMETRIC_MEAN));
        long t1 = System.nanoTime();
        ARXResult result = new ARXAnonymizer().anonymize(data, config);
        long globalMs = (System.nanoTime() - t1) / 1_000_000;
        ARXNode optimum = result.getGlobalOptimum();
        DataHandle handle = result.getOutput(optimum, false);
        StringBuilder levels = new StringBuilder();
        for (String qi : qis) {
            levels.append(levels.length() == 0 ? "" : ",").append(qi).append('=')
                  .append(optimum.getGeneralization(qi));
        }
        System.out.printf("GLOBAL levels={%s} suppressed=%d ms=%d%n", levels, outliers(handle), globalMs);

        long t2 = System.nanoTime();
        ARXProcessStatistics statistics = result.optimizeIterative(handle, gs, iterations, 0d);
        long localMs = (System.nanoTime() - t2) / 1_000_000;
        for (int step = 0; step < statistics.getNumberOfSteps(); step++) {
            System.out.printf("STEP levels=%s records=%d%n",
                              Arrays.toString(statistics.getStep(step).getTransformation()),
                              statistics.getStep(step).getNumberOfRecordsTransformed());
        }
        System.out.printf("LOCAL steps=%d suppressed=%d ms=%d%n", statistics.getNumberOfSteps(), outliers(handle),
                          localMs);
        handle.save(output, ',');
    }

    private static int outliers(DataHandle handle) {
        int count = 0;
        for (int row = 0; row < handle.getNumRows(); row++) {
            count += handle.isOutlier(row) ? 1 : 0;
        }
        return count;
    }
}
