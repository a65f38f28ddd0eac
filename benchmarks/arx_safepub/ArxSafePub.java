import java.io.File;
import java.util.Arrays;
import java.util.List;

import org.deidentifier.arx.ARXAnonymizer;
import org.deidentifier.arx.ARXConfiguration;
import org.deidentifier.arx.ARXConfiguration.SearchStepSemantics;
import org.deidentifier.arx.ARXLattice.ARXNode;
import org.deidentifier.arx.ARXResult;
import org.deidentifier.arx.Data;
import org.deidentifier.arx.DataHandle;
import org.deidentifier.arx.criteria.EDDifferentialPrivacy;
import org.deidentifier.arx.dp.ParameterCalculation;
import org.deidentifier.arx.metric.Metric;

/**
 * duckanon's benchmark driver for ARX 3.9.2's SafePub ((e,d)-differential privacy, data-dependent; bench_safepub.py).
 *
 *   java -cp CLASSES:ARX_JARS ArxSafePub params EPSILON DELTA
 *       prints PARAMS epsilon delta k beta: ARX's ParameterCalculation
 *   java -cp CLASSES:ARX_JARS ArxSafePub run CSV DELIM HIERARCHY_PATTERN QI1,QI2,... EPSILON DELTA SEARCH_EPSILON
 *            STEPS METRIC RUNS OUTDIR
 *       RUNS anonymizations in one JVM, each with fresh SecureRandom draws (ARX's non-deterministic mode):
 *       suppression limit 1, the metric's score function (loss, precision, dm, aecs, entropy), the search budget
 *       and STEPS expansions. Per run a RUN line (levels, records kept, ms) and OUTDIR/run_<i>.csv (every record,
 *       '*' where suppressed or not sampled).
 */
public class ArxSafePub {

    public static void main(String[] args) throws Exception {
        if (args.length == 3 && args[0].equals("params")) {
            double epsilon = Double.parseDouble(args[1]);
            double delta = Double.parseDouble(args[2]);
            ParameterCalculation calculation = new ParameterCalculation(epsilon, delta);
            System.out.printf("PARAMS %s %s %d %.17g%n", args[1], args[2], calculation.getK(), calculation.getBeta());
            return;
        }
        if (args.length != 12 || !args[0].equals("run")) {
            System.err.println("usage: ArxSafePub params EPS DELTA | run CSV DELIM PATTERN QIS EPS DELTA SEARCH_EPS "
                               + "STEPS METRIC RUNS OUTDIR");
            System.exit(2);
        }
        String csv = args[1];
        char delim = args[2].equals("tab") ? '\t' : args[2].charAt(0);
        String pattern = args[3];
        List<String> qis = Arrays.asList(args[4].split(","));
        double epsilon = Double.parseDouble(args[5]);
        double delta = Double.parseDouble(args[6]);
        double searchEpsilon = Double.parseDouble(args[7]);
        int steps = Integer.parseInt(args[8]);
        String metric = args[9];
        int runs = Integer.parseInt(args[10]);
        File outdir = new File(args[11]);

        long t0 = System.nanoTime();
        Data data = ArxCsv.load(csv, delim, pattern, qis, null);
        System.out.printf("LOAD rows=%d load_ms=%d%n", data.getHandle().getNumRows(), (System.nanoTime() - t0) / 1_000_000);

        for (int run = 0; run < runs; run++) {
            ARXConfiguration config = ARXConfiguration.create(1d, metric(metric));
            EDDifferentialPrivacy model = new EDDifferentialPrivacy(epsilon, delta);
            config.addPrivacyModel(model);
            config.setDPSearchBudget(searchEpsilon);
            config.setHeuristicSearchStepLimit(steps, SearchStepSemantics.EXPANSIONS);
            long t1 = System.nanoTime();
            ARXResult result = new ARXAnonymizer().anonymize(data, config);
            long ms = (System.nanoTime() - t1) / 1_000_000;
            ARXNode optimum = result.getGlobalOptimum();
            DataHandle handle = result.getOutput(optimum, false);
            int kept = 0;
            for (int row = 0; row < handle.getNumRows(); row++) {
                kept += handle.isOutlier(row) ? 0 : 1;
            }
            StringBuilder levels = new StringBuilder();
            for (String qi : qis) {
                levels.append(levels.length() == 0 ? "" : ",").append(optimum.getGeneralization(qi));
            }
            System.out.printf("RUN %d levels=%s kept=%d k=%d beta=%.17g ms=%d%n", run, levels, kept, model.getK(),
                              model.getBeta(), ms);
            handle.save(new File(outdir, "run_" + run + ".csv"), ',');
            data.getHandle().release();
        }
    }

    private static Metric<?> metric(String name) {
        switch (name) {
            case "loss": return Metric.createLossMetric();
            case "precision": return Metric.createPrecisionMetric();
            case "dm": return Metric.createDiscernabilityMetric();
            case "aecs": return Metric.createAECSMetric();
            case "entropy": return Metric.createEntropyMetric();
            default: throw new IllegalArgumentException("unknown metric " + name);
        }
    }
}
